import NIOPosix

/// How a prepared statement is planned.
public enum PostgresPlanning: Sendable, Hashable {
    /// At each execution, with the actual parameter values and the tables' current statistics
    /// (`plan_cache_mode = force_custom_plan`). Safe for any statement; planning a large one costs
    /// a fraction of a millisecond every time.
    case perExecution
    /// Once per connection, as a generic plan (`force_generic_plan`), re-planned only when a table's
    /// statistics or definition change. Only for statements written so that their plan cannot go
    /// bad, whatever the values and table sizes (lookups through unique indexes, say), or stays fit
    /// between two autoanalyses of a growing table (`LIMIT`ed scans in index order): a generic plan
    /// made while a fresh database's tables are empty is kept until autoanalyze runs.
    case cached
}

/// A leased connection, valid inside ``PostgresClient/withConnection(statement:file:line:_:)`` or
/// ``PostgresClient/withTransaction(statement:file:line:_:)``. Do not keep it beyond the closure.
public struct PostgresSession: Sendable {
    let connection: LibPQConnection
    let threadPool: NIOThreadPool

    /// The server process serving this session.
    public var backendPID: Int32 { connection.backendPID }

    /// Runs one parameterised statement (`$1`, `$2`, … bound to `parameters`). With `prepare`, the
    /// statement is prepared once per connection and reused: worth it for hot, fixed SQL; `planning`
    /// then says whether it is planned at each execution (the default) or once.
    ///
    /// A ``PostgresError`` it throws carries its ``PostgresError/Origin``: `statement` (the calling
    /// function's name unless given), the caller's file and line.
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
        let texts = parameters.map(\.postgresText)
        let connection = self.connection
        do {
            return try await threadPool.runIfActive { try connection.query(sql, texts, prepare: prepare, planning: planning) }
        } catch {
            throw PostgresError.attributed(error, to: .init(statement: statement, file: file, line: line))
        }
    }

    /// Runs SQL text without parameters through the simple protocol; it may hold several statements.
    /// Use it for fixed SQL only (migrations, BEGIN/COMMIT), never for text containing values. Its
    /// errors carry their origin as ``query(_:_:prepare:planning:statement:file:line:)``'s do.
    @discardableResult
    public func execute(
        _ sql: String,
        statement: String = #function,
        file: String = #fileID,
        line: Int = #line
    ) async throws
        -> PostgresQueryResult
    {
        let connection = self.connection
        do {
            return try await threadPool.runIfActive { try connection.execute(sql) }
        } catch {
            throw PostgresError.attributed(error, to: .init(statement: statement, file: file, line: line))
        }
    }

    /// Runs `body` with another statement timeout (`nil` for none): on the server
    /// (`statement_timeout`) and on the client's deadline for each call, for the few operations
    /// that may rightly run longer than the pool's timeout (migrations, large COPYs). The
    /// connection's own timeout is restored afterwards.
    public func withStatementTimeout<T>(_ timeout: Duration?, _ body: () async throws -> T) async throws -> T {
        let connection = self.connection
        let milliseconds = timeout.map { Int(min(max(0, $0.components.seconds), 2_000_000)) * 1000 } ?? 0
        try await execute("SET statement_timeout = \(milliseconds)")
        connection.callTimeout = PostgresConnectionSettings.callTimeout(
            statementTimeoutMilliseconds: milliseconds,
            grace: connection.settings.callGrace
        )
        defer { connection.callTimeout = connection.settings.callTimeout }
        let restore = "SET statement_timeout = \(connection.settings.statementTimeoutMilliseconds)"
        do {
            let value = try await body()
            try await execute(restore)
            return value
        } catch {
            // A connection left with the longer timeout would be handed to the next caller.
            _ = try? await execute(restore)
            throw error
        }
    }

    /// Streams rows into `COPY table (columns) FROM STDIN` (text format) and returns the row count.
    ///
    /// `body` writes rows through the ``PostgresCopyWriter``, which sends them in chunks, so the
    /// whole data set is never held in memory. If `body` throws, the COPY is aborted and nothing is
    /// written.
    /// Its errors carry their origin as ``query(_:_:prepare:planning:statement:file:line:)``'s do.
    @discardableResult
    public func copyIn(
        _ sql: String,
        statement: String = #function,
        file: String = #fileID,
        line: Int = #line,
        _ body: (PostgresCopyWriter) async throws -> Void
    ) async throws -> Int {
        let connection = self.connection
        do {
            try await threadPool.runIfActive { try connection.beginCopy(sql) }
            let writer = PostgresCopyWriter(connection: connection, threadPool: threadPool)
            do {
                try await body(writer)
                try await writer.flush()
            } catch {
                _ = try? await threadPool.runIfActive { try connection.endCopy(error: "aborted by client") }
                throw error
            }
            return try await threadPool.runIfActive { try connection.endCopy(error: nil) }
        } catch {
            throw PostgresError.attributed(error, to: .init(statement: statement, file: file, line: line))
        }
    }
}

/// Writes rows of a COPY FROM STDIN in PostgreSQL's text format, buffering up to a chunk size.
public final class PostgresCopyWriter: @unchecked Sendable {
    private let connection: LibPQConnection
    private let threadPool: NIOThreadPool
    private var buffer: [UInt8] = []
    private let chunkSize = 256 * 1024

    init(connection: LibPQConnection, threadPool: NIOThreadPool) {
        self.connection = connection
        self.threadPool = threadPool
        buffer.reserveCapacity(chunkSize + 4096)
    }

    /// Appends one row; `nil` values become NULL. Tabs, newlines and backslashes are escaped.
    public func write(_ row: [any PostgresEncodable]) async throws {
        for (index, value) in row.enumerated() {
            if index > 0 { buffer.append(UInt8(ascii: "\t")) }
            guard let text = value.postgresText else {
                buffer.append(UInt8(ascii: "\\"))
                buffer.append(UInt8(ascii: "N"))
                continue
            }
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "\\"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case UInt8(ascii: "\t"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                case UInt8(ascii: "\n"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case UInt8(ascii: "\r"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                default: buffer.append(byte)
                }
            }
        }
        buffer.append(UInt8(ascii: "\n"))
        if buffer.count >= chunkSize { try await flush() }
    }

    /// Appends bytes the caller has already formatted as complete rows in COPY's text format
    /// (fields separated by tabs, rows ended by newlines, special characters escaped). For bulk
    /// loads where building a value array per row would cost more than the row itself; call
    /// ``flushIfFull()`` between batches of rows.
    public func appendFormatted(_ body: (inout [UInt8]) -> Void) {
        body(&buffer)
    }

    /// Sends the buffer when it has reached the chunk size.
    public func flushIfFull() async throws {
        if buffer.count >= chunkSize { try await flush() }
    }

    /// Sends what is buffered.
    public func flush() async throws {
        guard !buffer.isEmpty else { return }
        let chunk = buffer
        buffer.removeAll(keepingCapacity: true)
        let connection = self.connection
        try await threadPool.runIfActive { try connection.putCopyData(chunk) }
    }
}
