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
                account, the secret files). It does not connect to the database or to APNs and FCM.

                On success it prints every setting with its value and where it came from (file, environment, arguments or \
                default), each app with its secrets as fingerprints, and exits 0; otherwise it prints the first problem and \
                exits 1.
                """
        )

        @OptionGroup var common: CommonOptions

        func run() async throws {
            let recorder = AccessRecorder()
            let reader = try await common.reader(recorder: recorder)
            _ = try CommonOptions.logSettings(reader)
            let apps: [AppConfiguration]
            do {
                apps = try await AppConfiguration.loadChecked(reader: reader)
            } catch {
                throw CommandError("configuration: \(error)")
            }
            var seen = Set<String>()
            let reads = recorder.events.filter { seen.insert($0.key).inserted }.sorted { $0.key < $1.key }
            let width = reads.map(\.key.count).max() ?? 0
            if let file = reader.string(forKey: "config.file") { print("# \(file)") }
            for read in reads {
                print("\(read.key.padding(toLength: width, withPad: " ", startingAt: 0))  \(read.shownValue)  (\(read.source))")
            }
            print("database: \(Database.summary(reader: reader))")
            if apps.isEmpty { print("apps: none (serve runs the demo app when database.url is unset too)") }
            for app in apps {
                print("app \(app.id):")
                for line in app.summary { print("  \(line)") }
            }
            print("configuration OK")
        }
    }
}
