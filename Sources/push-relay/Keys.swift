import ArgumentParser
import Configuration
import Foundation
import Logging
import Postgres
import PushRelay

/// `push-relay keys …`: API keys for app servers and admins.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create, list and revoke API keys.",
        discussion: "Keys are stored hashed; the plaintext is printed once, on the last line of `keys create`.",
        subcommands: [Create.self, List.self, Revoke.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create an app key (--app) or an admin key (--admin) and print it once.",
            discussion:
                "Scopes of app keys: \(APIKeyScope.allCases.map(\.rawValue).joined(separator: ", ")). Without --scope, an app key gets them all."
        )

        @OptionGroup var common: CommonOptions

        @Option(help: ArgumentHelp("The app the key belongs to.", valueName: "id"))
        var app: String?

        @Flag(help: "Create an admin key (every app, admin endpoints).")
        var admin = false

        @Option(name: .customLong("scope"), help: ArgumentHelp("A scope for an app key; repeat for several.", valueName: "scope"))
        var scopes: [String] = []

        @Option(help: ArgumentHelp("A note to recognise the key by in `keys list`.", valueName: "text"))
        var label: String?

        func validate() throws {
            guard admin != (app != nil) else { throw ValidationError("give exactly one of --app ID or --admin") }
            if let app, !AppConfiguration.isValidID(app) {
                throw ValidationError("'\(app)' is not a valid app id (lower-case letters, digits, '-' or '_')")
            }
            if admin && !scopes.isEmpty { throw ValidationError("admin keys have every scope; drop --scope") }
            for scope in scopes where APIKeyScope(rawValue: scope) == nil {
                throw ValidationError("unknown scope '\(scope)'; use \(APIKeyScope.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        }

        func run() async throws {
            let reader = try await common.reader()
            let logger = try common.logger(reader)
            if let app, let file = reader.string(forKey: "config.file") {
                let apps = try AppConfiguration.load(configFile: file)
                guard apps.contains(where: { $0.id == app }) else {
                    throw CommandError("app '\(app)' is not listed under apps: in \(file)")
                }
            }
            let scopes = self.scopes.isEmpty ? APIKeyScope.allCases : self.scopes.compactMap(APIKeyScope.init(rawValue:))
            try await withDatabase(reader: reader, logger: logger) { database in
                let (record, key) = try await APIKeyStore(client: database.client).create(appID: app, scopes: scopes, label: label)
                if let app {
                    print("created key \(record.prefix) for app \(app) with scopes \(record.scopes.joined(separator: ","))")
                } else {
                    print("created admin key \(record.prefix)")
                }
                print("store it now; it is not shown again:")
                print(key.plaintext)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List keys (never their secrets), newest first.")

        @OptionGroup var common: CommonOptions

        @Option(help: ArgumentHelp("Only the keys of this app.", valueName: "id"))
        var app: String?

        func run() async throws {
            let reader = try await common.reader()
            let logger = try common.logger(reader)
            try await withDatabase(reader: reader, logger: logger) { database in
                let records = try await APIKeyStore(client: database.client).list(appID: app)
                if records.isEmpty {
                    print("no keys")
                    return
                }
                let rows = records.map { record in
                    [
                        record.prefix, record.appID ?? "(admin)", record.scopes.joined(separator: ","),
                        record.revokedAt == nil ? "active" : "revoked",
                        record.createdAt.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: false)),
                        record.label ?? "",
                    ]
                }
                let header = ["PREFIX", "APP", "SCOPES", "STATE", "CREATED", "LABEL"]
                // Each column as wide as its widest cell, so nothing is cut.
                let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
                for line in [header] + rows {
                    let padded = line.enumerated().map { column, cell in
                        column == line.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                    }
                    print(padded.joined(separator: "  ").trimmingCharacters(in: .whitespaces))
                }
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a key by its prefix or id; it stops working at once.")

        @OptionGroup var common: CommonOptions

        @Argument(help: ArgumentHelp("The key's prefix (from `keys list`) or id.", valueName: "prefix-or-id"))
        var key: String

        func run() async throws {
            let reader = try await common.reader()
            let logger = try common.logger(reader)
            try await withDatabase(reader: reader, logger: logger) { database in
                if try await APIKeyStore(client: database.client).revoke(key) {
                    print("revoked \(key)")
                } else {
                    throw CommandError("no active key with prefix or id '\(key)'")
                }
            }
        }
    }
}

/// Opens the database (starting the embedded one if it exists; never creating one), applies pending migrations when
/// `migrate` and `database.migrate_on_start` allow, runs `body`, and shuts down what it started,
/// also when `body` fails.
func withDatabase(reader: ConfigReader, logger: Logger, migrate: Bool = true, _ body: (Database) async throws -> Void) async throws {
    let database: Database
    do {
        database = try await Database.open(reader: reader, logger: logger, createEmbedded: false)
    } catch let error as ConfigurationError {
        throw CommandError(error.message, exitStatus: .configuration)
    }
    do {
        if migrate && reader.bool(forKey: "database.migrate_on_start", default: true) { try await database.migrate() }
        try await body(database)
    } catch let error as PostgresError where error.code == .connectionFailed || error.refusesConnection {
        // Said plainly when the database refuses the configuration, or libpq cannot read it (exit status 78).
        let refusal = error.refusesConnection ? error : await database.client.diagnoseConnection()
        try? await database.shutdown()
        if let refusal, refusal.refusesConnection { throw DatabaseRefusal(cause: refusal) }
        throw error
    } catch {
        try? await database.shutdown()
        throw error
    }
    try await database.shutdown()
}
