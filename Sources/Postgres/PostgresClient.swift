import Logging
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Settings of a ``PostgresClient``.
public struct PostgresClientConfiguration: Sendable {
    /// A libpq connection string: `key=value` pairs or a `postgresql://` URI. It may list several
    /// hosts with `target_session_attrs=read-write` for failover, and any `sslmode` libpq knows.
    public var conninfo: String
    /// The most connections the pool opens at once.
    public var maxConnections: Int
    /// How long a caller waits for a free connection before ``PostgresError/Code/poolTimeout``.
    public var acquireTimeout: Duration
    /// Reported to the server as `application_name` (visible in `pg_stat_activity`).
    public var applicationName: String
    /// Timeouts and keepalives of every connection the pool opens.
    public var connection: PostgresConnectionSettings

    public init(
        conninfo: String,
        maxConnections: Int = 10,
        acquireTimeout: Duration = .seconds(10),
        applicationName: String = "push-relay",
        connection: PostgresConnectionSettings = .init()
    ) {
        self.conninfo = conninfo
        self.maxConnections = max(1, maxConnections)
        self.acquireTimeout = acquireTimeout
        self.applicationName = applicationName
        self.connection = connection
    }
}

/// How long a connection waits for PostgreSQL, and how a vanished server is noticed.
///
/// A server that stops answering without closing the connection (its host crashed or was cut
/// off) would otherwise hold every caller, and the pool slot, forever: the kernel notices an idle
/// peer through keepalives and unacknowledged data through `tcp_user_timeout`; the server ends a
/// statement at `statement_timeout`; and a call still unanswered `callGrace` after that is ended
/// by the client, which closes the connection (``StatementWatchdog``), so the pool opens a new one.
public struct PostgresConnectionSettings: Sendable, Hashable {
    /// libpq's `connect_timeout`, per host tried.
    public var connectTimeoutSeconds: Int
    /// The server's `statement_timeout` for the session; 0 for none.
    public var statementTimeoutMilliseconds: Int
    /// How long past the statement timeout the client still waits (covers the round trip).
    public var callGrace: Duration
    /// Seconds of idleness before the first keepalive probe, between probes, and probes lost
    /// before the connection is dead.
    public var keepaliveIdleSeconds: Int
    public var keepaliveIntervalSeconds: Int
    public var keepaliveCount: Int
    /// How long sent data may stay unacknowledged before the kernel drops the connection.
    public var tcpUserTimeoutMilliseconds: Int

    public init(
        connectTimeoutSeconds: Int = 5,
        statementTimeoutMilliseconds: Int = 15_000,
        callGrace: Duration = .seconds(2),
        keepaliveIdleSeconds: Int = 10,
        keepaliveIntervalSeconds: Int = 5,
        keepaliveCount: Int = 3,
        tcpUserTimeoutMilliseconds: Int = 20_000
    ) {
        self.connectTimeoutSeconds = min(max(1, connectTimeoutSeconds), 3600)
        self.statementTimeoutMilliseconds = min(max(0, statementTimeoutMilliseconds), Int(Int32.max))
        self.callGrace = max(.zero, callGrace)
        self.keepaliveIdleSeconds = min(max(1, keepaliveIdleSeconds), 32767)
        self.keepaliveIntervalSeconds = min(max(1, keepaliveIntervalSeconds), 32767)
        self.keepaliveCount = min(max(1, keepaliveCount), 127)
        self.tcpUserTimeoutMilliseconds = min(max(0, tcpUserTimeoutMilliseconds), Int(Int32.max))
    }

    /// The client's limit on one call: the statement timeout plus the grace; none when the
    /// statement timeout is 0.
    public var callTimeout: Duration? { Self.callTimeout(statementTimeoutMilliseconds: statementTimeoutMilliseconds, grace: callGrace) }

    static func callTimeout(statementTimeoutMilliseconds: Int, grace: Duration) -> Duration? {
        statementTimeoutMilliseconds > 0 ? .milliseconds(statementTimeoutMilliseconds) + grace : nil
    }
}

/// A bounded pool of libpq connections with an async API.
///
/// Every blocking libpq call runs on the client's own thread pool (one thread per connection), so a
/// slow query never stalls the Swift concurrency pool. Broken connections are dropped when they are
/// handed back or found closed on checkout, and new ones are opened on demand, so the client
/// recovers by itself when the server restarts. As a `Service` it closes its connections on
/// graceful shutdown; it also works without being run (tests, one-shot commands).
public final class PostgresClient: Service, Sendable {
    /// The configuration the client was created with.
    public let configuration: PostgresClientConfiguration
    let threadPool: NIOThreadPool
    private let pool: ConnectionPoolState
    private let logger: Logger
    /// Reports outages once; the listener reports into it too (``PostgresListener``).
    let trouble: TroubleLog

    /// - Parameter now: the clock ``recentWriteRefusal(within:)``'s window runs on; tests pass one
    ///   they move.
    public init(
        configuration: PostgresClientConfiguration,
        logger: Logger,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        self.configuration = configuration
        self.logger = logger
        self.trouble = TroubleLog(now: now)
        self.threadPool = NIOThreadPool(numberOfThreads: configuration.maxConnections)
        self.threadPool.start()
        self.pool = ConnectionPoolState(maxConnections: configuration.maxConnections)
    }

    deinit {
        threadPool.shutdownGracefully { _ in }
    }

    /// Waits for graceful shutdown, then closes the pool.
    public func run() async throws {
        try? await gracefulShutdown()
        await close()
    }

    /// Closes idle connections, fails waiting callers and closes busy connections when they return.
    public func close() async {
        let idle = pool.close()
        if !idle.isEmpty {
            _ = try? await threadPool.runIfActive { withExtendedLifetime(idle) {} }
        }
    }

    // MARK: Leasing

    /// Runs `body` with a connection held exclusively for its duration. A failure to get one (the
    /// pool's acquire timeout, a closed pool) carries the caller's origin as a statement's does.
    public func withConnection<T: Sendable>(
        statement: String = #function,
        file: String = #fileID,
        line: Int = #line,
        _ body: (PostgresSession) async throws -> T
    ) async throws -> T {
        try await withConnection(preferring: nil, statement: statement, file: file, line: line, body)
    }

    /// ``withConnection(statement:file:line:_:)`` on an idle connection that has prepared
    /// `preferring`, if one has and it is given.
    private func withConnection<T: Sendable>(
        preferring prepared: String?,
        statement: String,
        file: String,
        line: Int,
        _ body: (PostgresSession) async throws -> T
    ) async throws -> T {
        let began = ContinuousClock.now
        let connection: LibPQConnection
        do {
            connection = try await acquire(preferring: prepared)
        } catch {
            let error = PostgresError.attributed(error, to: .init(statement: statement, file: file, line: line))
            trouble.failed(error, began: began, logger: logger)
            throw error
        }
        let session = PostgresSession(connection: connection, threadPool: threadPool)
        do {
            let value = try await body(session)
            release(connection)
            trouble.succeeded(logger: logger)
            return value
        } catch {
            release(connection)
            trouble.failed(error, began: began, logger: logger)
            throw error
        }
    }

    /// Why the server refused to write within the last `window` (read-only, disk full, out of
    /// memory or connections), if it did: such a server is up but cannot take the work.
    ///
    /// The refusal is recorded before the failed call throws, so whoever answers that failure
    /// finds it here; the window runs on the client's clock (`now`), not on the time its callers
    /// happen to take.
    public func recentWriteRefusal(within window: Duration = .seconds(15)) -> String? {
        trouble.recentRefusal(within: window)
    }

    /// Why a new connection cannot be opened now, read closely (``LibPQConnection/diagnose(conninfo:applicationName:settings:)``):
    /// `nil` when one opens; an error whose ``PostgresError/refusesConnection`` says whether the
    /// database refuses the configuration (credentials, database, TLS) rather than being
    /// unreachable. One connection attempt, on the pool's threads, outside the pool.
    public func diagnoseConnection() async -> PostgresError? {
        let conninfo = configuration.conninfo
        let name = configuration.applicationName
        let settings = configuration.connection
        do {
            return try await threadPool.runIfActive {
                LibPQConnection.diagnose(conninfo: conninfo, applicationName: name, settings: settings)
            }
        } catch {
            return PostgresError(code: .poolClosed, message: "the connection pool is closed")
        }
    }

    /// Runs `body` inside `BEGIN … COMMIT`; any thrown error rolls the transaction back.
    ///
    /// A ``PostgresError`` thrown out of it says which step failed (``PostgresError/transactionStep``:
    /// BEGIN, the body or COMMIT) and, in ``PostgresError/rollbackFailure``, whether the ROLLBACK
    /// failed as well. A statement of the body keeps its own origin; BEGIN and COMMIT carry the
    /// caller's (`statement` is the calling function's name unless given).
    public func withTransaction<T: Sendable>(
        statement: String = #function,
        file: String = #fileID,
        line: Int = #line,
        _ body: (PostgresSession) async throws -> T
    ) async throws -> T {
        let origin = PostgresError.Origin(statement: statement, file: file, line: line)
        return try await withConnection(statement: statement, file: file, line: line) { session in
            do {
                try await session.execute("BEGIN", statement: statement, file: file, line: line)
            } catch {
                throw PostgresError.attributed(error, to: origin, step: .begin)
            }
            let value: T
            do {
                value = try await body(session)
            } catch {
                throw await Self.rollBack(session, after: PostgresError.attributed(error, to: origin, step: .body))
            }
            do {
                try await session.execute("COMMIT", statement: statement, file: file, line: line)
            } catch {
                throw await Self.rollBack(session, after: PostgresError.attributed(error, to: origin, step: .commit))
            }
            return value
        }
    }

    /// Rolls back after `error` and returns it, with the ROLLBACK's own failure noted. A failed
    /// ROLLBACK leaves the connection mid-transaction; release() then drops it.
    private static func rollBack(_ session: PostgresSession, after error: any Error) async -> any Error {
        do {
            try await session.execute("ROLLBACK")
            return error
        } catch let rollback {
            guard var error = error as? PostgresError else { return error }
            error.rollbackFailure = "\(rollback)"
            return error
        }
    }

    /// Runs one parameterised statement on a pooled connection (see
    /// ``PostgresSession/query(_:_:prepare:planning:statement:file:line:)``); its errors, a pool
    /// timeout included, carry the caller's origin.
    @discardableResult
    public func query(
        _ sql: String,
        _ parameters: [any PostgresEncodable] = [],
        prepare: Bool = false,
        planning: PostgresPlanning = .perExecution,
        statement: String = #function,
        file: String = #fileID,
        line: Int = #line
    ) async throws -> PostgresQueryResult {
        // A prepared statement goes to an idle connection that has it already, if one has: each
        // connection parses and plans it once, and a plan over many partitions takes milliseconds.
        try await withConnection(preferring: prepare ? sql : nil, statement: statement, file: file, line: line) {
            try await $0.query(sql, parameters, prepare: prepare, planning: planning, statement: statement, file: file, line: line)
        }
    }

    /// Sends `NOTIFY channel, payload` (through `pg_notify`, so both are bound parameters).
    public func notify(channel: String, payload: String = "", file: String = #fileID, line: Int = #line) async throws {
        try await query("SELECT pg_notify($1, $2)", [channel, payload], statement: "notify \(channel)", file: file, line: line)
    }

    /// Connections currently open (idle or leased), for metrics and tests.
    public var openConnections: Int { pool.openCount }

    /// Callers waiting for a connection to become free, for metrics and tests.
    public var waitingCallers: Int { pool.waiterCount }

    private func acquire(preferring prepared: String?) async throws -> LibPQConnection {
        while true {
            let grant: ConnectionPoolState.Grant
            switch pool.checkout(preferring: prepared) {
            case .grant(let immediate): grant = immediate
            case .closed: throw PostgresError(code: .poolClosed, message: "the connection pool is closed")
            case .wait: grant = try await waitForGrant()
            }
            switch grant {
            case .connection(let connection):
                if connection.isReusable { return connection }
                logger.debug("dropping a closed PostgreSQL connection", metadata: ["db.backend_pid": "\(connection.backendPID)"])
                pool.discard(connection)
            case .slot:
                do {
                    let conninfo = configuration.conninfo
                    let name = configuration.applicationName
                    let settings = configuration.connection
                    return try await threadPool.runIfActive {
                        try LibPQConnection.connect(conninfo: conninfo, applicationName: name, settings: settings)
                    }
                } catch {
                    pool.returnSlot()
                    throw error
                }
            }
        }
    }

    private func waitForGrant() async throws -> ConnectionPoolState.Grant {
        let id = pool.nextWaiterID()
        let timeout = configuration.acquireTimeout
        let pool = self.pool
        return try await withThrowingTaskGroup(of: ConnectionPoolState.Grant?.self) { group in
            group.addTask {
                try await withTaskCancellationHandler {
                    try await withCheckedThrowingContinuation { continuation in
                        pool.enqueue(id: id, continuation: continuation)
                    }
                } onCancel: {
                    pool.cancelWaiter(id: id)
                }
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            // A grant may still arrive for the losing side; give it back.
            while let late = try? await group.next() {
                if let late { pool.giveBack(late) }
            }
            guard let first else {
                throw PostgresError(code: .poolTimeout, message: "no database connection became free within \(timeout)")
            }
            return first
        }
    }

    private func release(_ connection: LibPQConnection) {
        if connection.wasTimedOut {
            // The idle connections lead to the same server and most likely share its fate: each
            // would cost its next caller a whole deadline to find out. New ones are opened instead.
            // At debug: the caller's timeout reaches the trouble log, which reports the outage once.
            let idle = pool.takeIdle()
            logger.debug(
                "PostgreSQL did not answer in time; the connection was closed and will be replaced",
                metadata: ["db.backend_pid": "\(connection.backendPID)", "db.idle_closed": "\(idle.count)"]
            )
            if !idle.isEmpty { threadPool.submit { _ in withExtendedLifetime(idle) {} } }
        }
        if connection.isReusable {
            pool.checkin(connection)
        } else {
            pool.discard(connection)
        }
    }
}

/// One warning, "database unavailable", when the database starts failing, naming the cause, and
/// one notice, "database available again", with the outage's length, when it answers again,
/// however many callers fail meanwhile and however often the cause changes (refused, then timed
/// out, then no free connection): an outage under load would otherwise log once per request.
///
/// Shared by the pool and the LISTEN connection, whichever notices first. The outage is measured
/// from the first failure seen to the first success, so it is at most as long as the real one.
final class TroubleLog: Sendable {
    /// The warning's message, which the operations runbook quotes.
    static let unavailable = "database unavailable"
    /// The notice's message, which the operations runbook quotes.
    static let availableAgain = "database available again"

    private struct State {
        var cause: String?
        var since: ContinuousClock.Instant?
        var refusal: (cause: String, at: ContinuousClock.Instant)?
        var recovered: ContinuousClock.Instant?
    }
    private let state = Mutex(State())
    /// Whether an outage is open, read without the lock on every success.
    private let troubled = Atomic<Bool>(false)
    /// The clock refusals are stamped and aged with.
    private let now: @Sendable () -> ContinuousClock.Instant

    init(now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.now = now
    }

    /// `began` is when the failed work started: work that started before the last recovery failed
    /// in the outage that ended (a connection attempt made during it, timing out just after), and
    /// opens no new one.
    func failed(_ error: any Error, began: ContinuousClock.Instant, logger: Logger) {
        // A closed pool is the relay shutting down, not the database failing.
        guard let error = error as? PostgresError, error.isUnavailable, error.code != .poolClosed else { return }
        let cause = error.unavailableCause ?? error.message
        let refused = error.sqlState.map { $0 == "25006" || $0.hasPrefix("53") || $0 == "58030" } ?? false
        let at = now()
        let (began, changed) = state.withLock { state -> (Bool, Bool) in
            if refused { state.refusal = (cause, at) }
            if !refused, state.cause == nil, let recovered = state.recovered, began < recovered { return (false, false) }
            guard state.cause != cause else { return (false, false) }
            let began = state.cause == nil
            if began { state.since = .now }
            state.cause = cause
            return (began, true)
        }
        troubled.store(true, ordering: .releasing)
        var metadata: Logger.Metadata = ["db.cause": "\(cause)", "db.error": "\(error.code)"]
        if let sqlState = error.sqlState { metadata["db.sqlstate"] = "\(sqlState)" }
        if began {
            logger.warning("\(Self.unavailable)", metadata: metadata)
        } else if changed {
            logger.debug("database still unavailable, for another cause", metadata: metadata)
        }
    }

    func succeeded(logger: Logger) {
        guard troubled.load(ordering: .acquiring) else { return }
        let at = now()
        let ended = state.withLock { state -> (cause: String, length: Duration)? in
            // A server refusing writes still answers reads: only time clears a refusal, or every
            // read between two refused writes would log twice.
            if let refusal = state.refusal, refusal.cause == state.cause, at - refusal.at < .seconds(60) { return nil }
            defer {
                state.cause = nil
                state.since = nil
                state.recovered = .now
            }
            troubled.store(false, ordering: .releasing)
            guard let cause = state.cause else { return nil }
            return (cause, state.since.map { ContinuousClock.now - $0 } ?? .zero)
        }
        if let ended {
            let milliseconds = ended.length.components.seconds * 1000 + ended.length.components.attoseconds / 1_000_000_000_000_000
            logger.notice("\(Self.availableAgain)", metadata: ["db.outage_ms": "\(milliseconds)", "db.was": "\(ended.cause)"])
        }
    }

    func recentRefusal(within window: Duration) -> String? {
        let at = now()
        return state.withLock { state in
            guard let refusal = state.refusal, at - refusal.at < window else { return nil }
            return refusal.cause
        }
    }
}

/// The pool's bookkeeping, guarded by a mutex so cancellation handlers can use it synchronously.
final class ConnectionPoolState: Sendable {
    enum Grant: Sendable {
        /// An idle connection to reuse.
        case connection(LibPQConnection)
        /// Permission to open one new connection (counted in `open` already).
        case slot
    }

    enum Checkout {
        case grant(Grant)
        case wait
        case closed
    }

    private struct State {
        var idle: [LibPQConnection] = []
        var open = 0
        var waiters: [(id: Int, continuation: CheckedContinuation<Grant, any Error>)] = []
        var closed = false
        var nextID = 0
    }

    private let maxConnections: Int
    private let state = Mutex(State())

    init(maxConnections: Int) { self.maxConnections = maxConnections }

    var openCount: Int { state.withLock { $0.open } }

    var waiterCount: Int { state.withLock { $0.waiters.count } }

    func nextWaiterID() -> Int {
        state.withLock {
            $0.nextID += 1
            return $0.nextID
        }
    }

    /// The idle connection returned last, or the last returned of those that have prepared
    /// `prepared`; a slot for a new one when none is idle and the bound allows.
    func checkout(preferring prepared: String?) -> Checkout {
        state.withLock { state in
            if state.closed { return .closed }
            if let prepared, let index = state.idle.lastIndex(where: { $0.hasPrepared(prepared) }) {
                return .grant(.connection(state.idle.remove(at: index)))
            }
            if let connection = state.idle.popLast() { return .grant(.connection(connection)) }
            if state.open < maxConnections {
                state.open += 1
                return .grant(.slot)
            }
            return .wait
        }
    }

    func enqueue(id: Int, continuation: CheckedContinuation<Grant, any Error>) {
        let failure: (any Error)? = state.withLock { state in
            if state.closed { return PostgresError(code: .poolClosed, message: "the connection pool is closed") }
            if Task.isCancelled { return CancellationError() }
            // A connection may have come back between checkout() and here.
            if let connection = state.idle.popLast() {
                continuation.resume(returning: .connection(connection))
                return nil
            }
            if state.open < maxConnections {
                state.open += 1
                continuation.resume(returning: .slot)
                return nil
            }
            state.waiters.append((id, continuation))
            return nil
        }
        if let failure { continuation.resume(throwing: failure) }
    }

    func cancelWaiter(id: Int) {
        let continuation = state.withLock { state -> CheckedContinuation<Grant, any Error>? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index).continuation
        }
        continuation?.resume(throwing: CancellationError())
    }

    func checkin(_ connection: LibPQConnection) { giveBack(.connection(connection)) }

    /// Returns a grant that is no longer needed: hands it to the next waiter or parks it.
    func giveBack(_ grant: Grant) {
        enum Action {
            case resume(CheckedContinuation<Grant, any Error>, Grant)
            case drop(LibPQConnection?)
            case none
        }
        let action: Action = state.withLock { state in
            if let waiter = state.waiters.first {
                state.waiters.removeFirst()
                return .resume(waiter.continuation, grant)
            }
            switch grant {
            case .connection(let connection):
                if state.closed {
                    state.open -= 1
                    return .drop(connection)
                }
                state.idle.append(connection)
                return .none
            case .slot:
                state.open -= 1
                return .none
            }
        }
        switch action {
        case .resume(let continuation, let grant): continuation.resume(returning: grant)
        case .drop, .none: break
        }
    }

    /// Forgets a broken connection; its place goes to the next waiter as a slot.
    func discard(_ connection: LibPQConnection) {
        _ = connection
        giveBack(.slot)
    }

    /// Permission to open a connection was not used (the attempt failed).
    func returnSlot() { giveBack(.slot) }

    /// Takes every idle connection out of the pool (their places become free) for closing.
    func takeIdle() -> [LibPQConnection] {
        let idle = state.withLock { state in
            defer { state.idle = [] }
            return state.idle
        }
        for _ in idle { giveBack(.slot) }
        return idle
    }

    /// Marks the pool closed and returns the idle connections for closing.
    func close() -> [LibPQConnection] {
        let (idle, waiters) = state.withLock { state in
            state.closed = true
            let idle = state.idle
            state.open -= idle.count
            state.idle = []
            let waiters = state.waiters
            state.waiters = []
            return (idle, waiters)
        }
        for waiter in waiters {
            waiter.continuation.resume(throwing: PostgresError(code: .poolClosed, message: "the connection pool is closed"))
        }
        return idle
    }
}
