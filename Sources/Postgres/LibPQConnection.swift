import CLibPQ
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One libpq connection, driven with libpq's blocking calls.
///
/// Only the pool and the listener touch this type, and always from a thread of a dedicated
/// `NIOThreadPool`, never from the Swift concurrency pool. A connection is used by one caller at a
/// time (the pool hands out exclusive leases), which is what makes the unchecked `Sendable` sound.
final class LibPQConnection: @unchecked Sendable {
    private let handle: OpaquePointer
    /// The backend process id, stable for the connection's lifetime.
    let backendPID: Int32
    /// This connection's deadline, watched by ``StatementWatchdog``.
    private let watch: StatementWatchdog.Cell
    /// How long one call may wait for the server before the watchdog closes the connection; `nil`
    /// for no limit. Set by the connection's single user (``PostgresSession/withStatementTimeout(_:_:)``).
    var callTimeout: Duration?
    /// The `statement_timeout` the session starts with, restored after a temporary change.
    let settings: PostgresConnectionSettings

    private init(handle: OpaquePointer, settings: PostgresConnectionSettings) {
        self.handle = handle
        self.backendPID = PQbackendPID(handle)
        self.settings = settings
        self.callTimeout = settings.callTimeout
        self.watch = StatementWatchdog.Cell(socket: PQsocket(handle))
        StatementWatchdog.shared.register(watch)
    }

    deinit {
        StatementWatchdog.shared.unregister(watch)
        PQfinish(handle)
    }

    /// Runs one blocking libpq call under ``callTimeout``. A call the watchdog ended returns
    /// libpq's failure; the errors built from it then say why (``noAnswer()``).
    private func guarded<T>(_ body: () throws -> T) rethrows -> T {
        try watch.guarded(callTimeout, body)
    }

    private func noAnswer() -> PostgresError {
        PostgresError(
            code: .timeout,
            message: "PostgreSQL did not answer within \(callTimeout.map { "\($0)" } ?? "its deadline"); the connection was closed"
        )
    }

    /// Whether the watchdog closed this connection (it is then broken for good).
    var wasTimedOut: Bool { watch.hasFired }

    /// Opens a connection. `conninfo` may be a `key=value` string or a `postgresql://` URI; PushRelay's
    /// defaults are placed before it so that anything the operator wrote wins, except the client
    /// encoding and date style, which the decoders rely on.
    static func connect(
        conninfo: String,
        applicationName: String,
        settings: PostgresConnectionSettings = .init()
    ) throws -> LibPQConnection {
        let parameters = try Parameters(conninfo: conninfo, applicationName: applicationName, settings: settings)
        guard let handle = withExtendedLifetime(parameters, { PQconnectdbParams(parameters.keys, parameters.values, 1) }) else {
            throw PostgresError(code: .connectionFailed, message: "libpq could not allocate a connection")
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(handle))
            PQfinish(handle)
            throw PostgresError(code: .connectionFailed, message: message)
        }
        // Server notices ("relation already exists, skipping") are informational; libpq's default
        // processor would print them to stderr.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        return LibPQConnection(handle: handle, settings: settings)
    }

    /// The keyword/value arrays libpq's connect calls take: PushRelay's defaults, then the
    /// operator's connection string, then the encoding the decoders rely on.
    private final class Parameters {
        let keys: [UnsafePointer<CChar>?]
        let values: [UnsafePointer<CChar>?]
        private let storage: [UnsafeMutablePointer<CChar>?]

        init(conninfo: String, applicationName: String, settings: PostgresConnectionSettings) throws {
            // libpq's messages about a string it cannot read quote it, password and all.
            try PostgresClientConfiguration.check(conninfo)
            var pairs: [(String, String)] = [
                ("connect_timeout", "\(settings.connectTimeoutSeconds)"),
                ("application_name", applicationName),
                // A peer that vanished is noticed by the kernel: keepalives on an idle connection, and
                // unacknowledged data given up on after tcp_user_timeout.
                ("keepalives", "1"),
                ("keepalives_idle", "\(settings.keepaliveIdleSeconds)"),
                ("keepalives_interval", "\(settings.keepaliveIntervalSeconds)"),
                ("keepalives_count", "\(settings.keepaliveCount)"),
                ("tcp_user_timeout", "\(settings.tcpUserTimeoutMilliseconds)"),
                // force_custom_plan: prepared statements skip parsing but are planned at each execution
                // with the tables' current sizes. A generic plan cached while a fresh database's tables
                // were empty keeps sequential scans (on devices, say) until autoanalyze runs, which on a
                // busy new install costs more each second. A statement written to be plan-stable can ask
                // for a cached plan instead (PostgresPlanning.cached).
                // jit off: every statement of the relay is short, and a row estimate that multiplies
                // across partitions (one row per partition of a primary-key lookup) lifts a plan's
                // cost past jit_above_cost, where compiling took 50-100 ms of a 1 ms statement.
                // No parallel workers, for the same reason: the costs summed over 20 partitions chose a
                // parallel plan for a ticket's status page, and starting its workers took 9 ms of a
                // statement whose scans took 0.1 ms.
                (
                    "options",
                    "-c TimeZone=UTC -c DateStyle=ISO -c plan_cache_mode=force_custom_plan -c jit=off "
                        + "-c max_parallel_workers_per_gather=0 -c statement_timeout=\(settings.statementTimeoutMilliseconds)"
                ),
            ]
            pairs += [("dbname", conninfo), ("client_encoding", "UTF8")]
            let keys = pairs.map { strdup($0.0) }
            let values = pairs.map { strdup($0.1) }
            storage = keys + values
            guard !storage.contains(nil) else {
                for pointer in storage { free(pointer) }
                throw PostgresError(code: .connectionFailed, message: "out of memory building the connection parameters")
            }
            self.keys = keys.map { UnsafePointer($0) } + [nil]
            self.values = values.map { UnsafePointer($0) } + [nil]
        }

        deinit {
            for pointer in storage { free(pointer) }
        }
    }

    /// Why a connection cannot be opened, in more detail than ``connect(conninfo:applicationName:settings:)``
    /// gives: libpq's blocking connect reports a server's refusal as text only, so this opens one
    /// with verbose errors, whose text carries the SQLSTATE (`FATAL:  28P01: password
    /// authentication failed …`). `nil` when a connection opens now.
    ///
    /// A server's refusal keeps its SQLSTATE (``PostgresError/refusesConnection``: 28000, 28P01,
    /// 3D000); settings libpq refuses before trying, or a TLS set-up that cannot work as asked,
    /// are ``PostgresError/Code/connectionSettings``; anything else (refused, unreachable, timed
    /// out) is ``PostgresError/Code/connectionFailed``.
    static func diagnose(conninfo: String, applicationName: String, settings: PostgresConnectionSettings) -> PostgresError? {
        let parameters: Parameters
        do {
            parameters = try Parameters(conninfo: conninfo, applicationName: applicationName, settings: settings)
        } catch {
            return error as? PostgresError
        }
        guard let handle = withExtendedLifetime(parameters, { PQconnectStartParams(parameters.keys, parameters.values, 1) }) else {
            return PostgresError(code: .connectionFailed, message: "libpq could not allocate a connection")
        }
        defer { PQfinish(handle) }
        // Bad before any attempt: the connection string or a setting cannot be used.
        if PQstatus(handle) == CONNECTION_BAD {
            return PostgresError(code: .connectionSettings, message: trimmed(PQerrorMessage(handle)))
        }
        PQsetErrorVerbosity(handle, PQERRORS_VERBOSE)
        // Each host and address gets connect_timeout (at least 2 s, as libpq gives it).
        let perAttempt = Duration.seconds(max(2, settings.connectTimeoutSeconds))
        var socket = PQsocket(handle)
        var deadline = ContinuousClock.now + perAttempt
        var polling = PGRES_POLLING_WRITING
        while true {
            switch polling {
            case PGRES_POLLING_OK:
                return nil
            case PGRES_POLLING_READING, PGRES_POLLING_WRITING:
                if PQsocket(handle) != socket {
                    socket = PQsocket(handle)
                    deadline = ContinuousClock.now + perAttempt
                }
                let left = deadline - ContinuousClock.now
                let milliseconds = max(0, Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000))
                var descriptor = pollfd(fd: socket, events: Int16(polling == PGRES_POLLING_READING ? POLLIN : POLLOUT), revents: 0)
                let ready = poll(&descriptor, 1, milliseconds)
                if ready == 0 {
                    return PostgresError(code: .connectionFailed, message: "no connection within \(perAttempt) (connect_timeout)")
                }
                if ready < 0 && errno != EINTR {
                    return PostgresError(code: .connectionFailed, message: "poll() failed while connecting")
                }
            default:
                return refusal(verboseMessage: PQerrorMessage(handle).map { String(cString: $0) } ?? "")
            }
            polling = PQconnectPoll(handle)
        }
    }

    /// The error for a failed connection attempt from libpq's verbose message: its SQLSTATE (one
    /// that refuses the configuration wins over others, as several hosts may have answered), and
    /// the text as the default verbosity prints it.
    static func refusal(verboseMessage: String) -> PostgresError {
        var codes: [String] = []
        var lines: [String] = []
        for line in verboseMessage.split(whereSeparator: \.isNewline) {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.isEmpty || text.hasPrefix("LOCATION:") { continue }
            // "…failed: FATAL:  28P01: password authentication failed …"
            if let range = text.range(of: #":  [0-9A-Z]{5}: "#, options: .regularExpression) {
                let code = text[range].dropFirst(3).prefix(5)
                codes.append(String(code))
                lines.append(text.replacingCharacters(in: range, with: ":  "))
            } else {
                lines.append(text)
            }
        }
        let message = trimmed(lines.joined(separator: "\n"))
        let sqlState = codes.first(where: PostgresError.refusingStates.contains) ?? codes.first
        if sqlState == nil, PostgresError.tlsRefusals.contains(where: { message.contains($0) }) {
            return PostgresError(code: .connectionSettings, message: message)
        }
        return PostgresError(code: .connectionFailed, sqlState: sqlState, message: message)
    }

    /// Whether the connection can take a command without a round trip: the socket is open, no bytes
    /// are waiting (a server that shut down sends a termination notice and closes), and no
    /// transaction is left open.
    var isReusable: Bool {
        guard PQstatus(handle) == CONNECTION_OK, PQtransactionStatus(handle) == PQTRANS_IDLE else { return false }
        // Data while idle is a notice, a notification, or the server saying goodbye: a FATAL
        // message followed by end of file. Read until nothing is left so the end of file is seen.
        for _ in 0..<8 {
            var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 0)
            if ready < 0 { return false }
            if ready == 0 { return PQstatus(handle) == CONNECTION_OK }
            if descriptor.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { return false }
            guard PQconsumeInput(handle) == 1 else { return false }
            while let notify = PQnotifies(handle) { PQfreemem(notify) }
            guard PQstatus(handle) == CONNECTION_OK else { return false }
        }
        // Still readable after several reads of an idle connection: not worth trusting.
        return false
    }

    /// Statements prepared on this connection, by SQL text.
    private var prepared: [String: String] = [:]
    /// The session's `plan_cache_mode`, as last set (the connection starts with force_custom_plan).
    private var planning = PostgresPlanning.perExecution

    /// Whether `sql` is prepared on this connection. The pool asks while it holds the connection
    /// idle, when nothing else uses it.
    func hasPrepared(_ sql: String) -> Bool { prepared[sql] != nil }

    /// Runs one parameterised statement with the extended protocol. With `prepare`, the statement
    /// is parsed once per connection and reused (for hot statements), and planned as `planning`
    /// says; the session's `plan_cache_mode` is switched first when it differs.
    func query(
        _ sql: String,
        _ parameters: [String?],
        prepare: Bool = false,
        planning: PostgresPlanning = .perExecution
    ) throws -> PostgresQueryResult {
        var name: String?
        if prepare {
            if planning != self.planning {
                _ = try execute("SET plan_cache_mode = \(planning == .cached ? "force_generic_plan" : "force_custom_plan")")
                self.planning = planning
            }
            if let existing = prepared[sql] {
                name = existing
            } else {
                let new = "push_relay_\(prepared.count + 1)"
                _ = try consume(guarded { PQprepare(handle, new, sql, Int32(parameters.count), nil) })
                prepared[sql] = new
                name = new
            }
        }
        let cValues = try Self.cStrings(parameters)
        defer { for pointer in cValues { free(pointer) } }
        var pointers: [UnsafePointer<CChar>?] = cValues.map { $0.map { UnsafePointer($0) } }
        let result = guarded {
            pointers.withUnsafeMutableBufferPointer { buffer in
                if let name {
                    return PQexecPrepared(handle, name, Int32(parameters.count), buffer.baseAddress, nil, nil, 0)
                }
                return PQexecParams(handle, sql, Int32(parameters.count), nil, buffer.baseAddress, nil, nil, 0)
            }
        }
        return try consume(result)
    }

    /// C copies of statement parameters (`nil` stays SQL NULL), to be freed by the caller. A copy
    /// that failed would otherwise be sent as NULL, another value, which for an owner check
    /// (`user_id = $2 OR $2 IS NULL`) means no check: it throws instead, freeing what it copied.
    static func cStrings(
        _ values: [String?],
        copy: (String) -> UnsafeMutablePointer<CChar>? = { strdup($0) }
    ) throws -> [UnsafeMutablePointer<CChar>?] {
        var copies: [UnsafeMutablePointer<CChar>?] = []
        copies.reserveCapacity(values.count)
        for value in values {
            guard let value else {
                copies.append(nil)
                continue
            }
            guard let copied = copy(value) else {
                for pointer in copies { free(pointer) }
                throw PostgresError(code: .server, message: "out of memory copying a statement parameter")
            }
            copies.append(copied)
        }
        return copies
    }

    /// Runs one or more statements with the simple protocol and no parameters (migrations, LISTEN).
    func execute(_ sql: String) throws -> PostgresQueryResult {
        try consume(guarded { PQexec(handle, sql) })
    }

    private func consume(_ result: OpaquePointer?) throws -> PostgresQueryResult {
        guard let result else { throw connectionError() }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return Self.extract(result)
        default:
            throw error(from: result)
        }
    }

    private static func extract(_ result: OpaquePointer) -> PostgresQueryResult {
        let columnCount = Int(PQnfields(result))
        let rowCount = Int(PQntuples(result))
        var names: [String] = []
        names.reserveCapacity(columnCount)
        for column in 0..<columnCount { names.append(String(cString: PQfname(result, Int32(column)))) }
        let index = PostgresRow.ColumnIndex(names: names)
        var rows: [PostgresRow] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            var values: [String?] = []
            values.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                if PQgetisnull(result, Int32(row), Int32(column)) == 1 {
                    values.append(nil)
                } else {
                    values.append(String(cString: PQgetvalue(result, Int32(row), Int32(column))))
                }
            }
            rows.append(PostgresRow(columnIndex: index, values: values))
        }
        let tuples = String(cString: PQcmdTuples(result))
        return PostgresQueryResult(columns: names, rows: rows, affectedRows: Int(tuples) ?? rowCount)
    }

    // MARK: COPY FROM STDIN

    /// Starts `COPY … FROM STDIN`; the server then expects ``putCopyData(_:)`` and ``endCopy(error:)``.
    func beginCopy(_ sql: String) throws {
        guard let result = guarded({ PQexec(handle, sql) }) else { throw connectionError() }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COPY_IN else { throw error(from: result) }
    }

    func putCopyData(_ bytes: [UInt8]) throws {
        let status = guarded {
            bytes.withUnsafeBufferPointer { buffer in
                buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    PQputCopyData(handle, $0, Int32(buffer.count))
                }
            }
        }
        guard status == 1 else {
            if watch.hasFired { throw noAnswer() }
            throw PostgresError(code: .copyFailed, message: Self.trimmed(PQerrorMessage(handle)))
        }
    }

    /// Ends the COPY; with an `error` the server aborts it and nothing is written.
    func endCopy(error: String?) throws -> Int {
        guard guarded({ PQputCopyEnd(handle, error) }) == 1 else {
            if watch.hasFired { throw noAnswer() }
            throw PostgresError(code: .copyFailed, message: Self.trimmed(PQerrorMessage(handle)))
        }
        var affected = 0
        var failure: PostgresError?
        while let result = guarded({ PQgetResult(handle) }) {
            if PQresultStatus(result) == PGRES_COMMAND_OK {
                affected = Int(String(cString: PQcmdTuples(result))) ?? 0
            } else if failure == nil {
                failure = self.error(from: result)
            }
            PQclear(result)
        }
        if let failure { throw failure }
        return affected
    }

    // MARK: LISTEN/NOTIFY

    /// Waits up to `timeoutMilliseconds` for the socket to become readable, then returns every
    /// notification that arrived. Throws when the connection is gone.
    func waitForNotifications(timeoutMilliseconds: Int32) throws -> [PostgresNotification] {
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, timeoutMilliseconds)
        if ready < 0 && errno != EINTR { throw connectionError() }
        if ready > 0 {
            guard PQconsumeInput(handle) == 1 else { throw connectionError() }
        }
        var notifications: [PostgresNotification] = []
        while let notify = PQnotifies(handle) {
            notifications.append(
                PostgresNotification(
                    channel: String(cString: notify.pointee.relname),
                    payload: String(cString: notify.pointee.extra),
                    processID: notify.pointee.be_pid
                )
            )
            PQfreemem(notify)
        }
        if PQstatus(handle) != CONNECTION_OK { throw connectionError() }
        return notifications
    }

    /// Quotes an identifier (a channel name) with libpq's own escaping.
    func escapeIdentifier(_ identifier: String) throws -> String {
        guard let escaped = PQescapeIdentifier(handle, identifier, identifier.utf8.count) else { throw connectionError() }
        defer { PQfreemem(escaped) }
        return String(cString: escaped)
    }

    // MARK: Errors

    private func connectionError() -> PostgresError {
        if watch.hasFired { return noAnswer() }
        return PostgresError(
            code: PQstatus(handle) == CONNECTION_OK ? .server : .connectionLost,
            message: Self.trimmed(PQerrorMessage(handle))
        )
    }

    private func error(from result: OpaquePointer) -> PostgresError {
        let sqlState = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
        let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
        if watch.hasFired { return noAnswer() }
        if PQstatus(handle) != CONNECTION_OK {
            return PostgresError(code: .connectionLost, sqlState: sqlState, message: primary ?? Self.trimmed(PQerrorMessage(handle)))
        }
        return PostgresError(code: .server, sqlState: sqlState, message: primary ?? Self.trimmed(PQresultErrorMessage(result)))
    }

    private static func trimmed(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "unknown libpq error" }
        // libpq ends a line of its message with "\n" and indents the next ("\n\tIs the server
        // running…"): one line reads better in a log and in an error's description.
        return trimmed(String(cString: message))
    }

    /// One line of libpq's message. A line said twice is kept once: with `sslmode=prefer` libpq
    /// tries with TLS and then without, and a refused password is reported for each try.
    private static func trimmed(_ message: String) -> String {
        var seen = Set<String>()
        let text = message.split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && seen.insert($0).inserted }
            .joined(separator: " ")
        return text.isEmpty ? "unknown libpq error" : text
    }
}

/// A message delivered by `NOTIFY`.
public struct PostgresNotification: Sendable, Hashable {
    /// The channel it was sent on.
    public var channel: String
    /// The payload (may be empty).
    public var payload: String
    /// The backend that sent it.
    public var processID: Int32
}
