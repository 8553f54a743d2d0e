import Foundation
import Postgres
import PushRelay
import TestSupport
import Testing

/// The `push-relay` commands as an operator runs them: exit status, what they print, and what they
/// leave behind.
@Suite("Command line")
struct CommandLineTests {
    struct Run {
        var status: Int32
        var output: String
        var error: String
    }

    /// Runs `push-relay` (or `executable`) with `arguments` in `directory`, with only `environment`
    /// (and PATH) set.
    static func run(_ arguments: [String], in directory: String, environment: [String: String] = [:], executable: String? = nil) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try executable ?? RelayProcess.executable)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.environment = environment.merging(["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]) { $1 }
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        try process.run()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, output: String(decoding: out, as: UTF8.self), error: String(decoding: err, as: UTF8.self))
    }

    static func directory() throws -> String {
        let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-cli-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static let app = """
        apps:
          - id: support
            webhook_secrets: ["support-secret-0123456789"]
        """

    @Test("keys and migrate never create a database: without database.url and an existing cluster they fail and say what to set")
    func noQuietDatabase() throws {
        let directory = try Self.directory()
        try Self.app.write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        for arguments in [
            ["keys", "create", "--config", "relay.yaml", "--app", "support"], ["migrate", "--config", "relay.yaml"], ["keys", "list"],
        ] {
            let run = try Self.run(arguments, in: directory)
            #expect(run.status == 1, "\(arguments): \(run.output)\(run.error)")
            #expect(run.error.contains("no database is configured") && run.error.contains("database.url"), "\(run.error)")
            #expect(!run.error.contains("USAGE"), "a runtime error comes without the usage text")
            #expect(!run.output.contains("created key"))
        }
        #expect(!FileManager.default.fileExists(atPath: directory + "/.push-relay-data"), "a cluster was created")
        // A misspelt database section is refused before anything runs.
        try ("database:\n  uri: postgresql://db/relay\n" + Self.app).write(toFile: directory + "/typo.yaml", atomically: true, encoding: .utf8)
        let typo = try Self.run(["migrate", "--config", "typo.yaml"], in: directory)
        #expect(typo.status == 1)
        #expect(typo.error.contains("unknown key 'database.uri'") && typo.error.contains("'database.url'"), "\(typo.error)")
    }

    @Test("config check prints the effective settings with secrets as fingerprints, and refuses a bad file naming the key")
    func configCheck() throws {
        let directory = try Self.directory()
        try ("database:\n  url: \"postgresql://relay:s3cret-password@db.internal/pushrelay\"\nhttp:\n  port: 47080\n" + Self.app)
            .write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        let good = try Self.run(["config", "check", "--config", "relay.yaml"], in: directory, environment: ["HTTP_HOST": "0.0.0.0"])
        #expect(good.status == 0, "\(good.error)")
        #expect(good.output.contains("configuration OK"))
        #expect(good.output.contains("http.port") && good.output.contains("47080  (file)"), "\(good.output)")
        #expect(good.output.contains("0.0.0.0  (environment)"), "\(good.output)")
        #expect(good.output.contains("database: host=db.internal dbname=pushrelay user=relay"), "\(good.output)")
        #expect(good.output.contains(SecretIdentifier.fingerprint("support-secret-0123456789")))
        #expect(!good.output.contains("s3cret-password") && !good.output.contains("support-secret"), "a secret was printed")
        try ("http:\n  prot: 47080\n" + Self.app).write(toFile: directory + "/bad.yaml", atomically: true, encoding: .utf8)
        let bad = try Self.run(["config", "check", "--config", "bad.yaml"], in: directory)
        #expect(bad.status == 1)
        #expect(bad.error.contains("unknown key 'http.prot'; did you mean 'http.port'?"), "\(bad.error)")
        let version = try Self.run(["--version"], in: directory)
        #expect(version.status == 0 && version.output.contains(PushRelayVersion.current))
        let format = try Self.run(["config", "check", "--config", "relay.yaml"], in: directory, environment: ["LOG_FORMAT": "jsn"])
        #expect(format.status == 1 && format.error.contains("unknown log format 'jsn'"), "\(format.error)")
    }

    @Test("health exits 0 when the relay's /health (or /ready) answers 200, and 1 with the reason otherwise")
    func health() async throws {
        let directory = try Self.directory()
        let conninfo = try await TestDatabase.makeDatabase()
        try ("database:\n  url: \"\(conninfo)\"\n" + Self.app).write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        let port = try EmbeddedPostgres.freePort()
        let closed = try Self.run(["health", "--port", "\(port)"], in: directory)
        #expect(closed.status == 1 && closed.error.contains("127.0.0.1:\(port)"), "\(closed.error)")
        let relay = try await RelayProcess.start(configFile: directory + "/relay.yaml", port: port, log: directory + "/relay.log")
        defer { relay.stop() }
        let healthy = try Self.run(["health", "--port", "\(port)"], in: directory)
        #expect(healthy.status == 0 && healthy.output.contains("/health: 200"), "\(healthy.output) \(healthy.error)")
        let ready = try Self.run(["health", "--ready"], in: directory, environment: ["HTTP_PORT": "\(port)"])
        #expect(ready.status == 0 && ready.output.contains("/ready: 200"), "\(ready.output) \(ready.error)")
        let other = try Self.run(["health", "--port", "\(try EmbeddedPostgres.freePort())"], in: directory)
        #expect(other.status == 1)
    }

    @Test("keys list shows every scope of a key, whatever their length")
    func keysList() async throws {
        let directory = try Self.directory()
        let conninfo = try await TestDatabase.makeDatabase()
        try ("database:\n  url: \"\(conninfo)\"\n" + Self.app).write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        let created = try Self.run(["keys", "create", "--config", "relay.yaml", "--app", "support", "--label", "ci"], in: directory)
        #expect(created.status == 0, "\(created.error)")
        let list = try Self.run(["keys", "list", "--config", "relay.yaml"], in: directory)
        #expect(list.status == 0, "\(list.error)")
        let scopes = APIKeyScope.allCases.map(\.rawValue).joined(separator: ",")
        #expect(list.output.contains(scopes), "\(list.output)")
        #expect(list.output.split(separator: "\n").last?.hasSuffix("ci") == true)
    }

    @Test("serve started before its database waits for it, with a warning per try, instead of exiting")
    func serveWaitsForDatabase() async throws {
        let directory = try Self.directory()
        let conninfo = try await TestDatabase.makeDatabase()
        let fields = conninfo.split(separator: " ").map(String.init)
        let target = try #require(fields.first { $0.hasPrefix("port=") }.flatMap { Int($0.dropFirst(5)) })
        let later = try EmbeddedPostgres.freePort()
        let moved = fields.map { $0.hasPrefix("port=") ? "port=\(later)" : $0 }.joined(separator: " ")
        try ("database:\n  url: \"\(moved)\"\n" + Self.app).write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        // Nothing listens on the database's port for the first 4 seconds.
        let proxy = Task {
            try await Task.sleep(for: .seconds(4))
            return try FreezableProxy(targetPort: target, listenPort: later)
        }
        let relay = try await RelayProcess.start(
            configFile: directory + "/relay.yaml",
            port: try EmbeddedPostgres.freePort(),
            log: directory + "/relay.log",
            logLevel: "info"
        )
        defer { relay.stop() }
        try await proxy.value.stop()
        let log = (try? String(contentsOfFile: relay.log, encoding: .utf8)) ?? ""
        #expect(log.contains("database unavailable at start; trying again"), "\(log)")
    }
}
