import Foundation
import Postgres
import TestSupport
import Testing

@testable import PushRelay

@Suite("Migrations built into the binary")
struct EmbeddedMigrationsTests {
    @Test("the binary's migrations are the repository's Migrations/*.sql, byte for byte and in order; a configured folder replaces them")
    func sameAsFiles() throws {
        let folder = packageRoot(from: #filePath).appendingPathComponent("Migrations").path
        let files = try Migrator.load(directory: folder)
        let embedded = try Database.migrations(DatabaseSettings())
        #expect(files.count >= 12)
        #expect(embedded == files)
        #expect(EmbeddedAssets.migrations.map(\.name) == EmbeddedAssets.migrations.map(\.name).sorted())
        var configured = DatabaseSettings()
        configured.migrationsDirectory = NSTemporaryDirectory() + "/push-relay-missing-\(UUID().uuidString)"
        #expect(throws: PostgresError.self) { try Database.migrations(configured) }
    }
}
