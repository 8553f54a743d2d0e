import Foundation
import Logging

/// One schema migration, read from a file named `NNNN_name.sql`.
public struct Migration: Sendable, Hashable {
    /// The number in the file name; migrations apply in ascending order.
    public var version: Int
    /// The rest of the file name, without the extension.
    public var name: String
    /// The SQL, run as one transaction.
    public var sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// `0001_initial` style label.
    public var label: String { String(format: "%04d_%@", version, name) }
}

/// Applies migrations in order, each inside its own transaction, recorded in `schema_migrations`.
///
/// A session-level advisory lock serialises migrators, so several instances starting at once apply
/// each migration exactly once: the second waits, then finds nothing left to do. An applied
/// migration whose file changed afterwards is an error rather than silently ignored.
public struct Migrator: Sendable {
    /// The advisory lock key (an arbitrary constant, "PUSHRELAY" in ASCII folded into 63 bits).
    static let lockKey: Int64 = 0x5055_5348_5245_4C41

    /// The migrations, sorted by version.
    public let migrations: [Migration]
    private let logger: Logger

    public init(migrations: [Migration], logger: Logger) {
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.logger = logger
    }

    /// The highest version known to this build, 0 when there are none.
    public var latestVersion: Int { migrations.last?.version ?? 0 }

    /// Reads every `NNNN_name.sql` in `directory`. Other files are ignored; two files with one
    /// number are an error.
    public static func load(directory: String) throws -> [Migration] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw PostgresError(code: .migration, message: "cannot read the migrations directory \(directory)")
        }
        var files: [(name: String, sql: String)] = []
        for fileName in names.sorted() where fileName.hasSuffix(".sql") {
            let path = (directory as NSString).appendingPathComponent(fileName)
            guard let sql = FileManager.default.contents(atPath: path).map({ String(decoding: $0, as: UTF8.self) }) else {
                throw PostgresError(code: .migration, message: "cannot read \(path)")
            }
            files.append((fileName, sql))
        }
        return try parse(files, source: directory)
    }

    /// The migrations among `files` ((file name, text) pairs) named `NNNN_name.sql`. Other names
    /// are ignored; two files with one number are an error naming `source`.
    public static func parse(_ files: [(name: String, sql: String)], source: String) throws -> [Migration] {
        var migrations: [Int: Migration] = [:]
        for (fileName, sql) in files where fileName.hasSuffix(".sql") {
            let stem = fileName.dropLast(4)
            guard let underscore = stem.firstIndex(of: "_"), let version = Int(stem[..<underscore]), version > 0 else { continue }
            if migrations[version] != nil {
                throw PostgresError(code: .migration, message: "two migrations share the number \(version) in \(source)")
            }
            migrations[version] = Migration(version: version, name: String(stem[stem.index(after: underscore)...]), sql: sql)
        }
        return migrations.values.sorted { $0.version < $1.version }
    }

    /// Applies what is missing and returns the migrations applied by this call (empty when the
    /// schema was current).
    @discardableResult
    public func migrate(_ client: PostgresClient) async throws -> [Migration] {
        // Waiting for another instance's migration and a migration of a large table may both take
        // longer than any statement of normal work.
        try await client.withConnection { session in
            try await session.withStatementTimeout(nil) { try await applyUnderLock(session) }
        }
    }

    private func applyUnderLock(_ session: PostgresSession) async throws -> [Migration] {
        try await session.query("SELECT pg_advisory_lock($1)", [Self.lockKey])
        do {
            let applied = try await applyPending(session)
            try await session.query("SELECT pg_advisory_unlock($1)", [Self.lockKey])
            return applied
        } catch {
            _ = try? await session.query("SELECT pg_advisory_unlock($1)", [Self.lockKey])
            throw error
        }
    }

    private func applyPending(_ session: PostgresSession) async throws -> [Migration] {
        try await session.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version    bigint PRIMARY KEY,
                name       text NOT NULL,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """
        )
        let recorded = try await session.query(
            "SELECT version, name, checksum FROM schema_migrations ORDER BY version"
        )
        var checksums: [Int: String] = [:]
        for row in recorded.rows {
            let (version, _, checksum) = try row.decode((Int, String, String).self)
            checksums[version] = checksum
        }
        var applied: [Migration] = []
        for migration in migrations {
            if let checksum = checksums[migration.version] {
                let current = try await session.query("SELECT md5($1)", [migration.sql]).first!.decode(String.self, at: 0)
                if current != checksum {
                    throw PostgresError(
                        code: .migration,
                        message: "migration \(migration.label) was changed after it was applied; add a new migration instead"
                    )
                }
                continue
            }
            logger.info("applying migration", metadata: ["db.migration": "\(migration.label)"])
            try await session.execute("BEGIN")
            do {
                try await session.execute(migration.sql)
                try await session.query(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, md5($3))",
                    [migration.version, migration.name, migration.sql]
                )
                try await session.execute("COMMIT")
            } catch {
                _ = try? await session.execute("ROLLBACK")
                if let error = error as? PostgresError, error.code == .server {
                    throw PostgresError(
                        code: .migration,
                        sqlState: error.sqlState,
                        message: "migration \(migration.label) failed: \(error.message)"
                    )
                }
                throw error
            }
            applied.append(migration)
        }
        return applied
    }

    /// The highest applied version, or 0 when `schema_migrations` does not exist yet.
    public func appliedVersion(_ client: PostgresClient) async throws -> Int {
        try await client.withConnection { session in
            let exists = try await session.query("SELECT to_regclass('schema_migrations') IS NOT NULL")
            guard try exists.first?.decode(Bool.self, at: 0) == true else { return 0 }
            let result = try await session.query("SELECT coalesce(max(version), 0) FROM schema_migrations")
            return try result.first?.decode(Int.self, at: 0) ?? 0
        }
    }
}
