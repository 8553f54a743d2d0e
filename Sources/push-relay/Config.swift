import ArgumentParser
import Configuration
import Foundation
import Logging
import Postgres
import PushRelay

/// `push-relay config …`.
struct Config: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a configuration without serving.",
        subcommands: [Check.self]
    )

    /// `push-relay config check`: every check `serve` makes before it opens the database.
    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate the configuration and print the effective settings, secrets redacted.",
            discussion: """
                Reads the file given by --config (or CONFIG_FILE) with the environment variables and options on top, as `serve` \
                does, and checks it as `serve` and a reload do: unknown keys (with the nearest known one), values of the wrong \
                type, unknown PUSH_RELAY_* variables, each app's ids, secrets and credential files (the .p8 key, the service \
                account, the secret files) and that a database is named (database.url, or database.embedded left true). It does \
                not connect to APNs and FCM, nor to the database unless --connect says so. --env-file reads the environment \
                file the service gets first.

                --connect also connects to database.url as serve would: it prints the server's version, whether it takes \
                writes and where the schema stands, or exits 78 when the database refuses the role, the password or the \
                database name (as serve would) and 1 when it cannot be reached.

                On success it prints every setting with its value and where it came from (file, environment, arguments or \
                default), the database it would use, each app with its secrets as fingerprints, and exits 0; otherwise it \
                prints the first problem and exits 78.
                """
        )

        @OptionGroup var common: CommonOptions

        @Flag(help: "Also connect to database.url and say whether the database takes the relay's role and where its schema is.")
        var connect = false

        func run() async throws {
            let recorder = AccessRecorder()
            let reader = try await common.reader(recorder: recorder)
            _ = try CommonOptions.logSettings(reader)
            let database = DatabaseSettings(config: reader.scoped(to: "database"))
            try database.checkNamed()
            let apps: [AppConfiguration]
            do {
                apps = try await AppConfiguration.loadChecked(reader: reader)
            } catch {
                throw CommandError("configuration: \(error)", exitStatus: .configuration)
            }
            var seen = Set<String>()
            let reads = recorder.events.filter { seen.insert($0.key).inserted }.sorted { $0.key < $1.key }
            let width = reads.map(\.key.count).max() ?? 0
            if let file = reader.string(forKey: "config.file") { print("# \(file)") }
            for read in reads {
                print("\(read.key.padding(toLength: width, withPad: " ", startingAt: 0))  \(read.shownValue)  (\(read.source))")
            }
            print(
                "database: \(Database.summary(reader: reader))" + (database.url == nil ? " (serve creates it if absent: database.url is unset)" : "")
            )
            if apps.isEmpty { print("apps: none (serve runs the demo app when database.url is unset too)") }
            for app in apps {
                print("app \(app.id):")
                for line in app.summary { print("  \(line)") }
            }
            if connect { try await Self.checkConnection(reader: reader, logger: try common.logger(reader)) }
            print("configuration OK")
        }

        /// `--connect`: one connection to database.url, as serve makes it.
        static func checkConnection(reader: ConfigReader, logger: Logger) async throws {
            let summary = Database.summary(reader: reader)
            guard DatabaseSettings(config: reader.scoped(to: "database")).url != nil else {
                print("database: not connected: database.url is unset, and serve starts the embedded cluster itself")
                return
            }
            do {
                try await withDatabase(reader: reader, logger: logger, migrate: false) { database in
                    let applied = try await database.migrator.appliedVersion(database.client)
                    let latest = database.migrator.latestVersion
                    let row = try await database.client.query(
                        "SELECT current_setting('server_version'), NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'"
                    ).rows.first
                    let version = try row?.decode(String.self, at: 0) ?? "?"
                    let writable = try row?.decode(Bool.self, at: 1) ?? false
                    let pending = "serve applies the rest at start (database.migrate_on_start), or run push-relay migrate"
                    let schema =
                        applied >= latest
                        ? "schema at version \(applied), as this build needs" : "schema at version \(applied) of \(latest): \(pending)"
                    let writes = writable ? "takes writes" : "read-only: serve would not be ready"
                    print("database: connected to PostgreSQL \(version) (\(writes)); \(schema)")
                    guard writable else {
                        throw CommandError("database: \(summary) is read-only (a standby?); the relay needs the primary")
                    }
                }
            } catch let error as PostgresError {
                throw CommandError("database: cannot connect to \(summary): \(error.message)")
            }
        }
    }
}
