import Foundation
import TestSupport
import Testing

@testable import Postgres

/// Why a connection cannot be opened: a database that refuses the configuration (role, password,
/// database, TLS settings) is told apart from one that is not reachable yet, which is what lets
/// `serve` stop at once on the first and wait for the second.
@Suite("Connection diagnosis against a real server")
struct ConnectionDiagnosisTests {
    /// The conninfo of a fresh database with `field=value` replaced (or added).
    private static func conninfo(_ replacements: [String: String] = [:]) async throws -> String {
        var fields = try await TestDatabase.makeDatabase().split(separator: " ").map(String.init)
        for (key, value) in replacements {
            fields.removeAll { $0.hasPrefix(key + "=") }
            fields.append("\(key)=\(value)")
        }
        return fields.joined(separator: " ")
    }

    private static func diagnose(_ conninfo: String) -> PostgresError? {
        LibPQConnection.diagnose(conninfo: conninfo, applicationName: "diagnosis-test", settings: .init())
    }

    @Test("a wrong password, an unknown role and an unknown database keep the server's SQLSTATE and refuse the configuration")
    func serverRefusals() async throws {
        #expect(Self.diagnose(try await Self.conninfo()) == nil, "a good connection string opens")
        let password = try #require(Self.diagnose(try await Self.conninfo(["password": "not-the-password"])))
        #expect(password.sqlState == "28P01" && password.refusesConnection, "\(password)")
        #expect(password.message.contains("password authentication failed"), "\(password.message)")
        #expect(!password.message.contains("28P01:") && !password.message.contains("LOCATION"), "the text reads as libpq's default")
        let role = try #require(Self.diagnose(try await Self.conninfo(["user": "no_such_role"])))
        #expect(role.sqlState == "28000" || role.sqlState == "28P01", "\(role)")
        #expect(role.refusesConnection)
        let database = try #require(Self.diagnose(try await Self.conninfo(["dbname": "no_such_database"])))
        #expect(database.sqlState == "3D000" && database.refusesConnection, "\(database)")
        // The pool's own connect reports the same refusal as text only.
        let client = PostgresClient(
            configuration: .test(conninfo: try await Self.conninfo(["dbname": "no_such_database"])),
            logger: TestDatabase.logger
        )
        let diagnosed = await client.diagnoseConnection()
        #expect(diagnosed?.sqlState == "3D000")
        await client.close()
    }

    @Test("settings libpq cannot use refuse the configuration; a server that is not there does not")
    func settingsAndAbsence() async throws {
        let option = try #require(Self.diagnose(try await Self.conninfo(["no_such_option": "1"])))
        #expect(option.code == .connectionSettings && option.refusesConnection, "\(option)")
        // The test server has no TLS: sslmode=require cannot work against it.
        let tls = try #require(Self.diagnose(try await Self.conninfo(["sslmode": "require"])))
        #expect(tls.code == .connectionSettings && tls.refusesConnection, "\(tls)")
        let port = try EmbeddedPostgres.freePort()
        let absent = try #require(Self.diagnose(try await Self.conninfo(["port": "\(port)"])))
        #expect(absent.code == .connectionFailed && !absent.refusesConnection && absent.isUnavailable, "\(absent)")
    }

    @Test("libpq's verbose text: the refusing SQLSTATE wins among several hosts' answers, and a line said twice is kept once")
    func verboseText() {
        let text = """
            connection to server at "db1" (10.0.0.1), port 5432 failed: FATAL:  57P03: the database system is starting up
            LOCATION:  ProcessStartupPacket, postmaster.c:2370
            connection to server at "db2" (10.0.0.2), port 5432 failed: FATAL:  28P01: password authentication failed for user "relay"
            LOCATION:  auth_failed, auth.c:323
            connection to server at "db2" (10.0.0.2), port 5432 failed: FATAL:  28P01: password authentication failed for user "relay"
            LOCATION:  auth_failed, auth.c:323

            """
        let error = LibPQConnection.refusal(verboseMessage: text)
        #expect(error.sqlState == "28P01" && error.refusesConnection)
        #expect(
            error.message
                == #"connection to server at "db1" (10.0.0.1), port 5432 failed: FATAL:  the database system is starting up connection to server at "db2" (10.0.0.2), port 5432 failed: FATAL:  password authentication failed for user "relay""#
        )
        let starting = LibPQConnection.refusal(verboseMessage: "connection to server failed: FATAL:  57P03: the database system is starting up\n")
        #expect(starting.sqlState == "57P03" && !starting.refusesConnection && starting.isUnavailable)
    }
}
