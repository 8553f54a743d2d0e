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
    static func run(_ arguments: [String], in directory: String, environment: [String: String] = [:], executable: String? = nil) async throws -> Run {
        let run = try await ChildProcess.run(
            try executable ?? RelayProcess.executable,
            arguments,
            environment: environment.merging(["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]) { $1 },
            directory: directory
        )
        return Run(status: run.status, output: run.output, error: run.error)
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
    func noQuietDatabase() async throws {
        let directory = try Self.directory()
        try Self.app.write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        for arguments in [
            ["keys", "create", "--config", "relay.yaml", "--app", "support"], ["migrate", "--config", "relay.yaml"], ["keys", "list"],
        ] {
            let run = try await Self.run(arguments, in: directory)
            #expect(run.status == 78, "\(arguments): \(run.output)\(run.error)")
            #expect(run.error.contains("no database is configured") && run.error.contains("database.url"), "\(run.error)")
            #expect(run.error.contains("--env-file /etc/push-relay/environment"), "what to add on a package host: \(run.error)")
            #expect(!run.error.contains("USAGE"), "a runtime error comes without the usage text")
            #expect(!run.output.contains("created key"))
        }
        #expect(!FileManager.default.fileExists(atPath: directory + "/.push-relay-data"), "a cluster was created")
        // A misspelt database section is refused before anything runs.
        try ("database:\n  uri: postgresql://db/relay\n" + Self.app).write(toFile: directory + "/typo.yaml", atomically: true, encoding: .utf8)
        let typo = try await Self.run(["migrate", "--config", "typo.yaml"], in: directory)
        #expect(typo.status == 78)
        #expect(typo.error.contains("unknown key 'database.uri'") && typo.error.contains("'database.url'"), "\(typo.error)")
    }

    @Test("config check prints the effective settings with secrets as fingerprints, and refuses a bad file naming the key")
    func configCheck() async throws {
        let directory = try Self.directory()
        try
            ("database:\n  url: \"postgresql://relay:s3cret-password@db.internal/pushrelay\"\n  acquire_timeout_seconds: 10\nhttp:\n  port: 47080\n"
            + Self.app)
            .write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        let good = try await Self.run(["config", "check", "--config", "relay.yaml"], in: directory, environment: ["HTTP_HOST": "0.0.0.0"])
        #expect(good.status == 0, "\(good.error)")
        #expect(good.output.contains("configuration OK"))
        #expect(good.output.contains("http.port") && good.output.contains("47080  (file)"), "\(good.output)")
        #expect(good.output.contains("0.0.0.0  (environment)"), "\(good.output)")
        let acquire = good.output.split(separator: "\n").first { $0.hasPrefix("database.acquire_timeout_seconds ") }
        #expect(acquire?.hasSuffix(" 10  (file)") == true, "a whole number is shown as written: \(acquire ?? "")")
        #expect(good.output.contains("database: host=db.internal dbname=pushrelay user=relay"), "\(good.output)")
        #expect(good.output.contains(SecretIdentifier.fingerprint("support-secret-0123456789")))
        #expect(!good.output.contains("s3cret-password") && !good.output.contains("support-secret"), "a secret was printed")
        try ("http:\n  prot: 47080\n" + Self.app).write(toFile: directory + "/bad.yaml", atomically: true, encoding: .utf8)
        let bad = try await Self.run(["config", "check", "--config", "bad.yaml"], in: directory)
        #expect(bad.status == 78)
        #expect(bad.error.contains("unknown key 'http.prot' (line 2, column 3); did you mean 'http.port'?"), "\(bad.error)")
        for help in [["--help"], ["help", "config"], ["config"], ["reload", "--help"]] {
            let run = try await Self.run(help, in: directory)
            #expect(run.status == 0 && run.output.contains("USAGE: push-relay"), "\(help): \(run.status) \(run.output)\(run.error)")
        }
        let version = try await Self.run(["--version"], in: directory)
        #expect(version.status == 0 && version.output.contains(PushRelayVersion.current))
        let format = try await Self.run(["config", "check", "--config", "relay.yaml"], in: directory, environment: ["LOG_FORMAT": "jsn"])
        #expect(format.status == 78 && format.error.contains("unknown log format 'jsn'"), "\(format.error)")
    }

    @Test("no part of a password libpq cannot read reaches an error or a summary: % not percent-encoding, @ not written %40")
    func unreadablePasswords() async throws {
        let directory = try Self.directory()
        try Self.app.write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        for password in ["pa%zzSecret9", "pa@ssSecret9", "p@ss@Secret9"] {
            let environment = ["DATABASE_URL": "postgresql://relay:\(password)@127.0.0.1:1/relay"]
            let migrate = try await Self.run(["migrate", "--config", "relay.yaml"], in: directory, environment: environment)
            #expect(migrate.status == 78, "\(password): \(migrate.error)")
            #expect(migrate.error.contains("%40"), "the relay says how to write it: \(migrate.error)")
            let check = try await Self.run(["config", "check", "--config", "relay.yaml"], in: directory, environment: environment)
            for text in [migrate.output, migrate.error, check.output, check.error] {
                #expect(!text.contains("Secret9") && !text.contains("ss@") && !text.contains("zz"), "\(password): \(text)")
            }
        }
    }

    @Test("health exits 0 when the relay's /health (or /ready) answers 200, and 1 with the reason otherwise")
    func health() async throws {
        let directory = try Self.directory()
        let conninfo = try await TestDatabase.makeDatabase()
        try ("database:\n  url: \"\(conninfo)\"\n" + Self.app).write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        let port = try EmbeddedPostgres.freePort()
        let closed = try await Self.run(["health", "--port", "\(port)"], in: directory)
        #expect(closed.status == 1 && closed.error.contains("127.0.0.1:\(port)"), "\(closed.error)")
        let relay = try await RelayProcess.start(configFile: directory + "/relay.yaml", port: port, log: directory + "/relay.log")
        defer { relay.stop() }
        let healthy = try await Self.run(["health", "--port", "\(port)"], in: directory)
        #expect(healthy.status == 0 && healthy.output.contains("/health: 200"), "\(healthy.output) \(healthy.error)")
        let ready = try await Self.run(["health", "--ready"], in: directory, environment: ["HTTP_PORT": "\(port)"])
        #expect(ready.status == 0 && ready.output.contains("/ready: 200"), "\(ready.output) \(ready.error)")
        let other = try await Self.run(["health", "--port", "\(try EmbeddedPostgres.freePort())"], in: directory)
        #expect(other.status == 1)
    }

    @Test("serve on a port another process listens on exits with the bind error, and the harness says so as soon as it exits")
    func serveOnTakenPort() async throws {
        let directory = try Self.directory()
        let conninfo = try await TestDatabase.makeDatabase()
        try ("database:\n  url: \"\(conninfo)\"\n" + Self.app).write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        let holder = try FreezableProxy(targetPort: try EmbeddedPostgres.freePort())
        defer { holder.stop() }
        // Before, the harness waited for /health until its hang ceiling (10 minutes) and then said
        // "did not become healthy"; a port taken between the pick and the bind cost a CI run that.
        let error = await #expect(throws: ConfigurationError.self) {
            try await RelayProcess.start(configFile: directory + "/relay.yaml", port: holder.port, log: directory + "/relay.log")
        }
        let message = error?.message ?? ""
        #expect(message.contains("exited with status 1 before it was healthy"), "\(message)")
        #expect(message.contains("Address already in use"), "\(message)")
    }

    @Test("keys list shows every scope of a key, whatever their length")
    func keysList() async throws {
        let directory = try Self.directory()
        let conninfo = try await TestDatabase.makeDatabase()
        try ("database:\n  url: \"\(conninfo)\"\n" + Self.app).write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        let created = try await Self.run(["keys", "create", "--config", "relay.yaml", "--app", "support", "--label", "ci"], in: directory)
        #expect(created.status == 0, "\(created.error)")
        let list = try await Self.run(["keys", "list", "--config", "relay.yaml"], in: directory)
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
    @Test("--env-file sets a systemd-style environment file's variables before the configuration is read; a bad line is named by number only")
    func environmentFile() async throws {
        let directory = try Self.directory()
        try Self.app.write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        try """
        # Read by push-relay.service (EnvironmentFile=) and by --env-file.
        ; another comment

        DATABASE_URL="postgresql://relay:pa ss@db.internal/pushrelay"
        HTTP_PORT = 47081
        LOG_LEVEL='warning'
        """.write(toFile: directory + "/environment", atomically: true, encoding: .utf8)
        let check = try await Self.run(["config", "check", "--config", "relay.yaml", "--env-file", "environment"], in: directory)
        #expect(check.status == 0, "\(check.error)")
        #expect(check.output.contains("database: host=db.internal dbname=pushrelay user=relay"), "\(check.output)")
        #expect(check.output.contains("47081  (environment)") && check.output.contains("warning  (environment)"), "\(check.output)")
        #expect(!check.output.contains("pa ss"), "the password was printed")
        try "DATABASE_URL=postgresql://relay:pw@db/relay\nexport SECRET_TOKEN=hunter2\n".write(
            toFile: directory + "/bad",
            atomically: true,
            encoding: .utf8
        )
        let bad = try await Self.run(["config", "check", "--config", "relay.yaml", "--env-file", "bad"], in: directory)
        #expect(bad.status == 78 && bad.error.contains("bad, line 2"), "\(bad.error)")
        #expect(!bad.error.contains("hunter2") && !bad.error.contains("pw@"), "a line's text was printed")
        let missing = try await Self.run(["config", "check", "--config", "relay.yaml", "--env-file", "nowhere"], in: directory)
        #expect(missing.status == 78 && missing.error.contains("nowhere: no such file"), "\(missing.error)")
    }

    @Test("database.embedded false without database.url: serve, config check and keys stop at once with status 78 and create nothing")
    func noEmbeddedDatabase() async throws {
        let directory = try Self.directory()
        try Self.app.write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        for arguments in [
            ["serve", "--config", "relay.yaml"], ["serve"], ["config", "check", "--config", "relay.yaml"],
            ["keys", "list", "--config", "relay.yaml"],
        ] {
            let run = try await Self.run(arguments, in: directory, environment: ["DATABASE_EMBEDDED": "false"])
            #expect(run.status == 78, "\(arguments): \(run.output)\(run.error)")
            #expect(run.error.contains("database.url is not set and database.embedded is false"), "\(arguments): \(run.error)")
            #expect(run.error.split(separator: "\n").count == 1, "one line: \(run.error)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory + "/.push-relay-data"), "something was created")
    }

    @Test("a database that refuses the relay's role or names no database stops serve and keys at once with status 78, not retried")
    func databaseRefusal() async throws {
        let directory = try Self.directory()
        let fields = try await TestDatabase.makeDatabase().split(separator: " ").map(String.init)
        for (field, value, state) in [("dbname", "no_such_database", "3D000"), ("password", "not-the-password", "28P01")] {
            let conninfo = (fields.filter { !$0.hasPrefix(field + "=") } + ["\(field)=\(value)"]).joined(separator: " ")
            try ("database:\n  url: \"\(conninfo)\"\n  start_wait_seconds: 30\n" + Self.app)
                .write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
            // Were it retried, serve would wait the 30 s and exit 1.
            let serve = try await Self.run(["serve", "--config", "relay.yaml", "--port", "\(try EmbeddedPostgres.freePort())"], in: directory)
            #expect(serve.status == 78, "\(field): \(serve.error)")
            #expect(serve.error.contains("SQLSTATE \(state)") && serve.error.contains("not retried"), "\(serve.error)")
            #expect(!serve.error.contains("trying again"), "\(serve.error)")
            #expect(!serve.error.contains("database unavailable"), "a refusal is not an outage: \(serve.error)")
            #expect(!serve.error.contains("Error:"), "said once, in the log: \(serve.error)")
            let keys = try await Self.run(["keys", "list", "--config", "relay.yaml"], in: directory)
            #expect(keys.status == 78 && keys.error.contains("SQLSTATE \(state)"), "\(keys.error)")
            // config check says "configuration OK" without connecting; with --connect it fails as serve does.
            let check = try await Self.run(["config", "check", "--config", "relay.yaml"], in: directory)
            #expect(check.status == 0, "\(check.error)")
            let connect = try await Self.run(["config", "check", "--connect", "--config", "relay.yaml"], in: directory)
            #expect(connect.status == 78 && connect.error.contains("SQLSTATE \(state)"), "\(field): \(connect.error)")
            #expect(!connect.output.contains("configuration OK"), "\(connect.output)")
        }
    }

    @Test("config check --connect says where the schema stands on a database that takes the role, and exits 1 on one it cannot reach")
    func configCheckConnect() async throws {
        let directory = try Self.directory()
        let conninfo = try await TestDatabase.makeDatabase()
        try ("database:\n  url: \"\(conninfo)\"\n" + Self.app).write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        let fresh = try await Self.run(["config", "check", "--connect", "--config", "relay.yaml"], in: directory)
        #expect(fresh.status == 0, "\(fresh.error)")
        #expect(fresh.output.contains("database: connected to PostgreSQL "), "\(fresh.output)")
        #expect(fresh.output.contains("(takes writes); schema at version 0 of "), "\(fresh.output)")
        #expect(try await Self.run(["migrate", "--config", "relay.yaml"], in: directory).status == 0)
        let current = try await Self.run(["config", "check", "--connect", "--config", "relay.yaml"], in: directory)
        #expect(current.status == 0 && current.output.contains("as this build needs"), "\(current.output)\(current.error)")
        let port = try EmbeddedPostgres.freePort()
        try ("database:\n  url: \"host=127.0.0.1 port=\(port) dbname=relay user=relay connect_timeout=2\"\n" + Self.app)
            .write(toFile: directory + "/nowhere.yaml", atomically: true, encoding: .utf8)
        let nowhere = try await Self.run(["config", "check", "--connect", "--config", "nowhere.yaml"], in: directory)
        #expect(nowhere.status == 1, "\(nowhere.output)\(nowhere.error)")
        #expect(nowhere.error.contains("Error: database: cannot connect to host=127.0.0.1 port=\(port)"), "\(nowhere.error)")
    }

    @Test("a key file that cannot be read says why: no such file, or permission denied with its owner and mode")
    func unreadableFiles() async throws {
        let directory = try Self.directory()
        let app = Self.app + "\n    user_tokens:\n      secret_file: \(directory)/user-tokens.key\n"
        try app.write(toFile: directory + "/relay.yaml", atomically: true, encoding: .utf8)
        let missing = try await Self.run(["config", "check", "--config", "relay.yaml"], in: directory)
        #expect(missing.status == 78, "\(missing.error)")
        #expect(missing.error.contains("cannot read user_tokens.secret_file \(directory)/user-tokens.key: no such file"), "\(missing.error)")
        // Root reads any file: the permission case needs another user (runuser, as root).
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser") else { return }
        try String(repeating: "k", count: 40).write(toFile: directory + "/user-tokens.key", atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: directory + "/user-tokens.key")
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory)
        let denied = try await Self.run(
            ["-u", "nobody", "--", try RelayProcess.executable, "config", "check", "--config", "relay.yaml"],
            in: directory,
            executable: "/usr/sbin/runuser"
        )
        #expect(denied.status == 78, "\(denied.error)")
        #expect(denied.error.contains("permission denied (owner root:root, mode 0600; push-relay runs as nobody)"), "\(denied.error)")
    }
}
