import Foundation
import Logging
import TestSupport
import Testing

@testable import Postgres

/// A store error names the statement that failed and the caller's file and line, in its debug
/// description and a log line's metadata, never in its description (which may reach an answer);
/// an error out of a transaction says which step failed.
@Suite("Store errors say where they came from")
struct StoreErrorOriginTests {
    private func client(maxConnections: Int = 2, acquireTimeout: Duration = hangCeiling) async throws -> PostgresClient {
        PostgresClient(
            configuration: .test(conninfo: try await TestDatabase.makeDatabase(), maxConnections: maxConnections, acquireTimeout: acquireTimeout),
            logger: TestDatabase.logger
        )
    }

    /// The error `body` throws, as a ``PostgresError``.
    private func failure(_ body: () async throws -> Void) async throws -> PostgresError {
        do {
            try await body()
        } catch let error as PostgresError {
            return error
        }
        Issue.record("no PostgresError was thrown")
        throw CancellationError()
    }

    @Test("a failed statement names the calling function, the caller's file and line; the description leaves them out")
    func statement() async throws {
        let client = try await client()
        defer { Task { await client.close() } }
        let line = #line + 1
        let error = try await failure { try await client.query("SELECT * FROM no_such_table") }
        #expect(error.sqlState == "42P01")
        #expect(error.origin == .init(statement: "statement()", file: "PostgresTests/StoreErrorOriginTests.swift", line: line))
        #expect(error.transactionStep == nil)
        #expect(error.debugDescription.contains("statement statement() at PostgresTests/StoreErrorOriginTests.swift:\(line)"))
        #expect(!error.description.contains("StoreErrorOriginTests"), "\(error.description)")
        let metadata = PostgresError.metadata(error, ["push.app": "support"])
        #expect(metadata["db.statement"] == "statement()")
        #expect(metadata["db.source"] == "PostgresTests/StoreErrorOriginTests.swift:\(line)")
        #expect(metadata["push.app"] == "support")
        #expect(metadata["error"] == "\(error)")
        // A name the caller gives replaces the function's.
        let named = try await failure { try await client.query("SELECT 1/0", statement: "divide") }
        #expect(named.origin?.statement == "divide")
    }

    @Test("a statement of a transaction's body keeps its own origin and says the body failed")
    func body() async throws {
        let client = try await client()
        defer { Task { await client.close() } }
        var line = 0
        let error = try await failure {
            try await client.withTransaction { session in
                _ = try await session.query("SELECT 1")
                line = #line + 1
                _ = try await session.query("SELECT * FROM no_such_table", statement: "read the missing table")
            }
        }
        #expect(error.origin == .init(statement: "read the missing table", file: "PostgresTests/StoreErrorOriginTests.swift", line: line))
        #expect(error.transactionStep == .body)
        #expect(error.rollbackFailure == nil)
        #expect(PostgresError.metadata(error)["db.step"] == "body")
    }

    @Test("a COMMIT that fails (a deferred unique constraint) is the commit step, with the transaction's caller as origin")
    func commit() async throws {
        let client = try await client()
        defer { Task { await client.close() } }
        try await client.query("CREATE TABLE once (id int UNIQUE DEFERRABLE INITIALLY DEFERRED)")
        let line = #line + 2
        let error = try await failure {
            try await client.withTransaction(statement: "insert twice") { session in
                // Both inserts succeed; the constraint is checked at COMMIT.
                try await session.query("INSERT INTO once VALUES (1)")
                try await session.query("INSERT INTO once VALUES (1)")
            }
        }
        #expect(error.sqlState == "23505")
        #expect(error.transactionStep == .commit)
        #expect(error.origin == .init(statement: "insert twice", file: "PostgresTests/StoreErrorOriginTests.swift", line: line))
        #expect(error.debugDescription.contains("in the transaction's commit"), "\(error.debugDescription)")
        #expect(try await client.query("SELECT count(*) FROM once").first?.decode(Int.self, at: 0) == 0)
    }

    @Test("a body that loses its connection: the body step, and the ROLLBACK's own failure noted")
    func rollback() async throws {
        let client = try await client()
        defer { Task { await client.close() } }
        let error = try await failure {
            try await client.withTransaction { session in
                _ = try await session.query("SELECT pg_terminate_backend(pg_backend_pid())", statement: "end own backend")
            }
        }
        #expect(error.transactionStep == .body)
        #expect(error.origin?.statement == "end own backend")
        #expect(error.rollbackFailure != nil, "\(error.debugDescription)")
        #expect(error.debugDescription.contains("its ROLLBACK failed too"))
        #expect(PostgresError.metadata(error)["db.rollback_error"] != nil)
        // The pool dropped the broken connection: the next caller gets a working one.
        #expect(try await client.query("SELECT 1").first?.decode(Int.self, at: 0) == 1)
    }

    @Test("a caller that gets no connection within the acquire timeout is named; so is a COPY that fails")
    func acquireAndCopy() async throws {
        // A test of the acquire timeout: its own short one, while the only connection is held.
        let client = try await client(maxConnections: 1, acquireTimeout: .milliseconds(200))
        defer { Task { await client.close() } }
        var line = 0
        let timedOut = try await client.withConnection { _ in
            try await failure {
                line = #line + 1
                try await client.query("SELECT 1")
            }
        }
        #expect(timedOut.code == .poolTimeout)
        #expect(timedOut.origin == .init(statement: "acquireAndCopy()", file: "PostgresTests/StoreErrorOriginTests.swift", line: line))

        let copy = try await failure {
            try await client.withConnection { session in
                _ = try await session.copyIn("COPY no_such_table (a) FROM STDIN", statement: "copy rows") { try await $0.write([1]) }
            }
        }
        #expect(copy.origin?.statement == "copy rows")
        #expect(copy.origin?.file == "PostgresTests/StoreErrorOriginTests.swift")
    }
}
