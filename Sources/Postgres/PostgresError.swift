import Logging

/// An error from the PostgreSQL layer.
///
/// `description` carries the server's primary message and SQLSTATE but never the SQL text, bound
/// parameters or connection secrets, so it is safe to log and to show to operators.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Sendable {
            case connectionFailed = "connection_failed"
            case connectionSettings = "connection_settings"
            case connectionLost = "connection_lost"
            case server
            case poolClosed = "pool_closed"
            case poolTimeout = "pool_timeout"
            case decoding
            case copyFailed = "copy_failed"
            case migration
            case embeddedServer = "embedded_server"
            case timeout
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A new connection could not be opened (server down, refused, authentication failed).
        public static let connectionFailed = Code(.connectionFailed)
        /// The connection settings cannot work: libpq refused them before trying (a malformed
        /// connection string, an unknown option) or TLS cannot be set up as they ask (a missing
        /// root certificate, a server without TLS under `sslmode=require`, a certificate that
        /// does not verify). Trying again cannot help.
        public static let connectionSettings = Code(.connectionSettings)
        /// An open connection broke while a command was running.
        public static let connectionLost = Code(.connectionLost)
        /// The server rejected a command; ``PostgresError/sqlState`` says why.
        public static let server = Code(.server)
        /// The pool was closed before or while waiting for a connection.
        public static let poolClosed = Code(.poolClosed)
        /// No connection became free within the pool's acquire timeout.
        public static let poolTimeout = Code(.poolTimeout)
        /// A column value could not be decoded into the requested Swift type.
        public static let decoding = Code(.decoding)
        /// A COPY FROM STDIN stream failed.
        public static let copyFailed = Code(.copyFailed)
        /// A migration could not be loaded or applied.
        public static let migration = Code(.migration)
        /// The embedded PostgreSQL server could not be initialised, started or stopped.
        public static let embeddedServer = Code(.embeddedServer)
        /// The server did not answer a command within the client's deadline; the connection was
        /// closed (the server may be unreachable without having closed it).
        public static let timeout = Code(.timeout)

        public var description: String { base.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// The five-character SQLSTATE reported by the server, when there is one.
    public var sqlState: String?
    /// A human-readable message: the server's primary message or libpq's connection message.
    public var message: String

    /// Which statement failed and where it was issued (``Origin``), attached where the caller met
    /// the store: by ``PostgresSession`` and ``PostgresClient``, from their callers' `#function`,
    /// `#fileID` and `#line`. The first attachment stays: a statement inside a transaction keeps its
    /// own origin, not the transaction's.
    public var origin: Origin?
    /// The step of ``PostgresClient/withTransaction(statement:file:line:_:)`` that failed, for an
    /// error thrown out of one.
    public var transactionStep: TransactionStep?
    /// Why the ROLLBACK after a failed body or COMMIT failed too, if it did (the connection is then
    /// dropped, not reused).
    public var rollbackFailure: String?

    public init(code: Code, sqlState: String? = nil, message: String) {
        self.code = code
        self.sqlState = sqlState
        self.message = message
    }

    /// A statement's name and the place in the caller's code that issued it. Never the SQL text or
    /// its values: it names the code, so it goes in logs and debug output only, never in an HTTP
    /// answer (``PostgresError/description`` leaves it out).
    public struct Origin: Sendable, Hashable, CustomStringConvertible {
        /// A short name for the statement: the calling function's name unless the caller gave one.
        public var statement: String
        /// The caller's `#fileID` (`PushRelay/JobStore.swift`) and line.
        public var file: String
        public var line: Int

        public init(statement: String, file: String, line: Int) {
            self.statement = statement
            self.file = file
            self.line = line
        }

        public var description: String { "\(statement) at \(file):\(line)" }
    }

    /// The steps of a transaction, told apart in its errors.
    public enum TransactionStep: String, Sendable, Hashable {
        /// `BEGIN` failed: nothing of the body ran.
        case begin
        /// The body threw; the transaction was rolled back.
        case body
        /// The body ran but `COMMIT` failed (a deferred constraint, a serialisation failure, a
        /// lost connection): nothing was committed, or, for a lost connection, it is not known.
        case commit
    }

    /// `error` with `origin` and `step` attached where it is a ``PostgresError`` that has none yet;
    /// any other error unchanged.
    static func attributed(_ error: any Error, to origin: Origin, step: TransactionStep? = nil) -> any Error {
        guard var error = error as? PostgresError else { return error }
        if error.origin == nil { error.origin = origin }
        if error.transactionStep == nil { error.transactionStep = step }
        return error
    }

    /// Whether the failure means the database cannot do the work now but may later, whatever the
    /// command (as opposed to a bad command): the caller should be told to retry.
    public var isUnavailable: Bool {
        switch code {
        case .connectionFailed, .connectionLost, .poolTimeout, .poolClosed, .timeout: true
        default: unavailableCause != nil
        }
    }

    /// Whether the database refuses this configuration rather than being unreachable: the server
    /// rejected the role or its password (SQLSTATE 28000, 28P01) or does not have the database
    /// (3D000), or the connection settings cannot work (``Code/connectionSettings``). Trying again
    /// cannot help; the operator must change the configuration.
    public var refusesConnection: Bool {
        code == .connectionSettings || (code == .connectionFailed && sqlState.map(Self.refusingStates.contains) == true)
    }

    /// The SQLSTATEs of a server refusing a connection's role, password or database.
    static let refusingStates: Set<String> = ["28000", "28P01", "3D000"]

    /// libpq's words for a TLS set-up that cannot work as configured (its messages are English
    /// unless the process sets a locale, which PushRelay does not). A TLS error that may pass
    /// ("SSL SYSCALL error", a connection closed during the handshake) is not among them.
    static let tlsRefusals = [
        "SSL was required", "root certificate file", "certificate verify failed", "does not match host name",
        "certificate file", "private key file", "sslmode", "alert unknown ca", "alert handshake failure",
        "wrong version number", "unsupported protocol", "no protocols available",
    ]

    /// What a "try again later" SQLSTATE means, in words for a log line; `nil` for any other.
    ///
    /// Class 08 (connection exception), 57 (operator intervention: shutdown, cannot connect now,
    /// statement timeout, query canceled), 53 (insufficient resources: disk full, out of memory,
    /// too many connections), 25006 (read-only transaction: a standby, or a primary demoted
    /// during failover), 40001 and 40P01 (serialization failure, deadlock: the transaction may
    /// succeed when run again), 55P03 (lock not available), 58030 (I/O error).
    public var unavailableCause: String? {
        guard let sqlState else { return nil }
        switch sqlState {
        case "25006": return "the database is read-only"
        case "53100": return "the database's disk is full"
        case "53200": return "the database is out of memory"
        case "53300": return "the database has too many connections"
        case "57014": return "a statement timed out"
        case "40001": return "a serialization failure"
        case "40P01": return "a deadlock"
        case "55P03": return "a lock was not available"
        case "58030": return "the database had an I/O error"
        default:
            if sqlState.hasPrefix("08") { return "the connection to the database failed" }
            if sqlState.hasPrefix("57") { return "the database is shutting down or not accepting connections" }
            if sqlState.hasPrefix("53") { return "the database is out of resources" }
            return nil
        }
    }

    /// Whether the server refused a value of the command (SQLSTATE class 22, data exception, such
    /// as a malformed array literal or a byte sequence invalid in the encoding) or hit a limit with
    /// one (class 54, such as an index row too large): the cause is in the data, so a statement
    /// that carried many callers' data can succeed for the others without the one at fault.
    public var isDataException: Bool {
        guard code == .server, let sqlState else { return false }
        return sqlState.hasPrefix("22") || sqlState.hasPrefix("54")
    }

    /// Never the server's own words for a data exception: its primary message quotes the refused
    /// value (`malformed array literal: "{…}"` holds every element of the array), and that value
    /// is request data (notification text, device tokens).
    public var description: String {
        var text = "PostgresError(\(code)"
        if let sqlState { text += ", sqlstate \(sqlState)" }
        if code == .server, let sqlState, sqlState.hasPrefix("22") {
            return text + "): the server refused a value (its message is withheld: it may quote the value)"
        }
        return text + "): \(message)"
    }
}

extension PostgresError: CustomDebugStringConvertible {
    /// ``description`` and where the error came from: the statement's name, the caller's file and
    /// line, the transaction step.
    public var debugDescription: String {
        var text = description
        var place: [String] = []
        if let origin { place.append("statement \(origin)") }
        if let transactionStep { place.append("in the transaction's \(transactionStep.rawValue)") }
        if let rollbackFailure { place.append("its ROLLBACK failed too: \(rollbackFailure)") }
        if !place.isEmpty { text += " [" + place.joined(separator: "; ") + "]" }
        return text
    }

    /// A log line's metadata for work that failed with `error`, added to `metadata`: `error` (its
    /// description) and, for a store error, `db.statement`, `db.source` (file:line), `db.step` (of
    /// a transaction) and `db.rollback_error`, so the line says which of the relay's statements
    /// failed. Nothing of it is request data.
    public static func metadata(_ error: any Error, _ metadata: Logger.Metadata = [:]) -> Logger.Metadata {
        var metadata = metadata
        metadata["error"] = "\(error)"
        guard let error = error as? PostgresError else { return metadata }
        if let origin = error.origin {
            metadata["db.statement"] = "\(origin.statement)"
            metadata["db.source"] = "\(origin.file):\(origin.line)"
        }
        if let step = error.transactionStep { metadata["db.step"] = "\(step.rawValue)" }
        if let failure = error.rollbackFailure { metadata["db.rollback_error"] = "\(failure)" }
        return metadata
    }
}

extension PostgresError {
    /// The level for a line about work that failed with `error`: `.debug` when it is the database
    /// being unavailable, which the pool reports once per outage ("database unavailable", then
    /// "database available again" with its length), or the work being cancelled (shutdown ends a
    /// caller still waiting for a connection); `level` for any other error.
    public static func logLevel(for error: any Error, otherwise level: Logger.Level = .warning) -> Logger.Level {
        error is CancellationError || (error as? PostgresError)?.isUnavailable == true ? .debug : level
    }
}
