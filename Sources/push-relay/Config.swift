import ArgumentParser
import Configuration
import Foundation
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
                not connect to the database or to APNs and FCM. --env-file reads the environment file the service gets first.

                On success it prints every setting with its value and where it came from (file, environment, arguments or \
                default), the database it would use, each app with its secrets as fingerprints, and exits 0; otherwise it \
                prints the first problem and exits 78.
                """
        )

        @OptionGroup var common: CommonOptions

        func run() async throws {
            let recorder = AccessRecorder()
            let reader = try await common.reader(recorder: recorder)
            _ = try CommonOptions.logSettings(reader)
            let database = DatabaseConfiguration(config: reader.scoped(to: "database"))
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
            print("configuration OK")
        }
    }
}
