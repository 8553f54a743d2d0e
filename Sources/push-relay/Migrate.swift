import ArgumentParser
import Configuration
import Postgres
import PushRelay

/// `push-relay migrate`: applies pending schema migrations and exits.
struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply pending database migrations, then exit.",
        discussion: """
            Safe to run while other relays start: an advisory lock makes each migration apply exactly once. Running it again when the schema is \
            current changes nothing.
            """
    )

    @OptionGroup var common: CommonOptions

    func run() async throws {
        let reader = try await common.reader()
        let logger = try common.logger(reader)
        try await withDatabase(reader: reader, logger: logger, migrate: false) { database in
            let applied = try await database.migrate()
            let version = try await database.migrator.appliedVersion(database.client)
            if applied.isEmpty {
                print("schema is up to date at version \(version); nothing to apply")
            } else {
                for migration in applied { print("applied \(migration.label)") }
                print("schema is now at version \(version)")
            }
        }
    }
}
