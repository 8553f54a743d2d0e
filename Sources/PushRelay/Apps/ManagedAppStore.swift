import Foundation
import HTTPTypes
import JWTKit
import Postgres

/// Apps managed through the admin API, stored in PostgreSQL (`managed_apps`), for operators who
/// host many customer apps without editing and reloading a file for each.
///
/// Each row holds one app's whole configuration as JSON, sealed with AES-256-GCM under the key
/// of `apps_store.key_file` (``ManagedAppStoreSettings``), the app id authenticated with it: the
/// table holds no secret, nor any other part of the configuration, in clear text. A managed app
/// carries its credentials inline (``AppConfiguration/fileKeys`` must be empty) and may not take
/// an id the configuration file defines: those apps stay read-only through the API.
///
/// Every change bumps `managed_apps_generation` and sends `NOTIFY push_relay_apps` (payload: the
/// new generation) in its own transaction, by trigger, whoever makes it: instances listening on
/// ``channel`` reload at once, and ``generation()`` is a one-row read for a periodic check.
public struct ManagedAppStore: Sendable {
    /// The NOTIFY channel of every change.
    public static let channel = "push_relay_apps"

    /// One stored app.
    public struct Record: Sendable {
        public var configuration: AppConfiguration
        /// 1 when created, one more on each replacement.
        public var version: Int64
        public var createdAt: Date
        public var updatedAt: Date
        /// The id of the key the row is sealed with (``ManagedAppKey/id``).
        public var sealedWith: String
    }

    let client: PostgresClient
    let key: ManagedAppKey
    let previousKey: ManagedAppKey?
    let fileAppIDs: @Sendable () -> Set<String>

    /// - Parameters:
    ///   - key: seals every write and opens rows sealed with it.
    ///   - previousKey: opens rows sealed before a key rotation; ``list()`` seals them again with `key`.
    ///   - fileAppIDs: the ids of the configuration file's apps (asked on each write, so a reload
    ///     of the file is seen): those ids are refused.
    public init(
        client: PostgresClient,
        key: ManagedAppKey,
        previousKey: ManagedAppKey? = nil,
        fileAppIDs: @escaping @Sendable () -> Set<String>
    ) {
        self.client = client
        self.key = key
        self.previousKey = previousKey
        self.fileAppIDs = fileAppIDs
    }

    /// A stored app that cannot be served: its row cannot be opened (sealed with a key this relay
    /// lacks, or altered) or its configuration fails the checks. It is skipped, not fatal: the
    /// other apps start and reload without it, and the admin API and console show why.
    public struct Unusable: Sendable, Equatable {
        public var id: String
        /// What is wrong, naming keys and key ids, never a secret.
        public var problem: String
        public var sealedWith: String
        public var version: Int64
        public var updatedAt: Date
    }

    /// The stored apps: those that can be served, and those skipped.
    public struct Listing: Sendable {
        public var records: [Record]
        public var unusable: [Unusable]
        public var apps: [AppConfiguration] { records.map(\.configuration) }
    }

    /// Every managed app that can be served, opened and validated, sorted by id (see ``records()``).
    public func list() async throws -> [AppConfiguration] {
        try await records().apps
    }

    /// Every managed app with its row's details, sorted by id, and the rows skipped. Rows sealed
    /// with the previous key are sealed again with the current one (a conditional update: another
    /// instance doing the same at the same time changes nothing twice).
    public func records() async throws -> Listing {
        let result = try await client.query(
            "SELECT id, sealed, key_id, version, created_at, updated_at FROM managed_apps ORDER BY id"
        )
        var listing = Listing(records: [], unusable: [])
        for row in result.rows {
            let record: Record
            do {
                record = try open(row)
            } catch let error as ManagedAppStoreError {
                listing.unusable.append(
                    Unusable(
                        id: try row.decode(String.self, at: 0),
                        problem: error.description,
                        sealedWith: try row.decode(String.self, at: 2),
                        version: try row.decode(Int64.self, at: 3),
                        updatedAt: try row.decode(Date.self, at: 5)
                    )
                )
                continue
            }
            if let previousKey, record.sealedWith == previousKey.id {
                try await reseal(record)
            }
            listing.records.append(record)
        }
        return listing
    }

    /// One managed app, or `nil` when there is none with this id.
    public func get(_ id: String) async throws -> Record? {
        guard AppConfiguration.isValidID(id) else { return nil }
        let result = try await client.query(
            "SELECT id, sealed, key_id, version, created_at, updated_at FROM managed_apps WHERE id = $1",
            [id]
        )
        return try result.first.map(open)
    }

    /// Creates or replaces the app `app.id`, after checking it as the configuration file's apps are
    /// checked (credentials included) and that it is inline and not one of the file's ids.
    /// Returns the stored record and whether it was created.
    @discardableResult
    public func put(_ app: AppConfiguration) async throws -> (record: Record, created: Bool) {
        try check(app)
        let plaintext = try JSONEncoder().encode(app)
        let sealed = try key.seal(plaintext, app: app.id)
        let result = try await client.query(
            """
            INSERT INTO managed_apps AS m (id, sealed, key_id) VALUES ($1, $2, $3)
            ON CONFLICT (id) DO UPDATE SET sealed = EXCLUDED.sealed, key_id = EXCLUDED.key_id,
                version = m.version + 1, updated_at = now()
            RETURNING version, created_at, updated_at
            """,
            [app.id, sealed, key.id]
        )
        let row = try result.first.unwrap(or: ManagedAppStoreError(.invalid, "the row was not written"))
        let version = try row.decode(Int64.self, at: 0)
        let record = Record(
            configuration: app,
            version: version,
            createdAt: try row.decode(Date.self, at: 1),
            updatedAt: try row.decode(Date.self, at: 2),
            sealedWith: key.id
        )
        return (record, version == 1)
    }

    /// Deletes the managed app `id`; `false` when there was none. A file app's id is refused.
    @discardableResult
    public func delete(_ id: String) async throws -> Bool {
        if fileAppIDs().contains(id) { throw ManagedAppStoreError.readOnly(id) }
        return try await client.query("DELETE FROM managed_apps WHERE id = $1", [id]).affectedRows > 0
    }

    /// The change counter: it moves on every change of `managed_apps`, so reading it (one row)
    /// tells an instance whether its copy of the managed apps is current.
    public func generation() async throws -> Int64 {
        try await client.query("SELECT generation FROM managed_apps_generation", prepare: true).first?.decode(
            Int64.self,
            at: 0
        ) ?? 0
    }

    // MARK: Checks and sealing

    /// Throws ``ManagedAppStoreError`` when `app` cannot be stored.
    func check(_ app: AppConfiguration) throws {
        guard AppConfiguration.isValidID(app.id) else {
            throw ManagedAppStoreError(
                .invalid,
                "app id '\(app.id)' must be lower-case letters, digits, '-' or '_' (at most 64)"
            )
        }
        if fileAppIDs().contains(app.id) { throw ManagedAppStoreError.readOnly(app.id) }
        if let file = app.fileKeys.first {
            let inline =
                file == "apns.certificate"
                ? "apns.token (certificate authentication reads files only)" : String(file.dropLast(5))
            throw ManagedAppStoreError(
                .invalid,
                "app '\(app.id)': \(file) names a file on the relay's disk; a managed app gives \(inline) inline"
            )
        }
        do {
            try AppConfiguration.validate([app])
        } catch let error as ConfigurationError {
            throw ManagedAppStoreError(.invalid, error.message)
        }
        // The file's apps find a bad key when the providers are built at start-up; a managed app
        // is refused here instead, so a reload of every instance never meets it.
        if let pem = app.apns?.token?.key, (try? ES256PrivateKey(pem: pem)) == nil {
            throw ManagedAppStoreError(.invalid, "app '\(app.id)': apns.token.key is not a PKCS#8 P-256 key (.p8)")
        }
        if let account = app.fcm?.inlineServiceAccount, (try? Insecure.RSA.PrivateKey(pem: account.privateKey)) == nil {
            throw ManagedAppStoreError(
                .invalid,
                "app '\(app.id)': the private_key of fcm.service_account is not an RSA key"
            )
        }
    }

    private func open(_ row: PostgresRow) throws -> Record {
        let id = try row.decode(String.self, at: 0)
        let sealed = try row.decode(Data.self, at: 1)
        let sealedWith = try row.decode(String.self, at: 2)
        guard let opener = [key, previousKey].compactMap({ $0 }).first(where: { $0.id == sealedWith }) else {
            throw ManagedAppStoreError(
                .undecryptable,
                "managed app '\(id)' is sealed with key \(sealedWith), which is neither apps_store.key_file (\(key.id))"
                    + (previousKey.map { " nor apps_store.previous_key_file (\($0.id))" } ?? "")
                    + "; set apps_store.key_file or apps_store.previous_key_file to that key"
            )
        }
        let configuration: AppConfiguration
        do {
            configuration = try JSONDecoder().decode(AppConfiguration.self, from: try opener.open(sealed, app: id))
        } catch {
            throw ManagedAppStoreError(
                .undecryptable,
                "managed app '\(id)' cannot be opened with key \(sealedWith): the row was altered or the key is wrong"
            )
        }
        guard configuration.id == id else {
            throw ManagedAppStoreError(.undecryptable, "managed app '\(id)' holds the configuration of another app")
        }
        do {
            try AppConfiguration.validate([configuration])
        } catch let error as ConfigurationError {
            throw ManagedAppStoreError(.invalid, "stored \(error.message)")
        }
        return Record(
            configuration: configuration,
            version: try row.decode(Int64.self, at: 3),
            createdAt: try row.decode(Date.self, at: 4),
            updatedAt: try row.decode(Date.self, at: 5),
            sealedWith: sealedWith
        )
    }

    /// Seals a row opened with the previous key again with the current key, unless it changed
    /// since it was read. Its version and times stay: its content is the same.
    private func reseal(_ record: Record) async throws {
        let sealed = try key.seal(try JSONEncoder().encode(record.configuration), app: record.configuration.id)
        try await client.query(
            "UPDATE managed_apps SET sealed = $1, key_id = $2 WHERE id = $3 AND version = $4 AND key_id = $5",
            [sealed, key.id, record.configuration.id, record.version, record.sealedWith]
        )
    }
}

/// Why the managed app store refused or failed; ``apiError`` is the admin API's answer.
public struct ManagedAppStoreError: Error, CustomStringConvertible, Sendable, APIErrorConvertible {
    public enum Code: Sendable, Hashable {
        /// The app is defined in the configuration file.
        case readOnly
        /// The configuration is not acceptable; the message names the key.
        case invalid
        /// A stored row cannot be opened with the configured keys.
        case undecryptable
        /// `apps_store.key_file` is not set.
        case disabled
    }

    public var code: Code
    /// Names the app and the key; never a secret.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    static func readOnly(_ app: String) -> ManagedAppStoreError {
        ManagedAppStoreError(
            .readOnly,
            "app '\(app)' is defined in the configuration file and is read-only through the API; edit the file instead"
        )
    }

    static var disabled: ManagedAppStoreError {
        ManagedAppStoreError(
            .disabled,
            "managed apps are disabled: set apps_store.key_file to a file holding 32 random bytes in base64 (openssl rand -base64 32)"
        )
    }

    var apiError: APIError {
        switch code {
        case .readOnly: APIError(.conflict, code: "app_read_only", message: message)
        case .invalid: APIError(.unprocessableContent, code: "invalid_app", message: message)
        case .undecryptable: APIError(.internalServerError, code: "app_undecryptable", message: message)
        case .disabled: APIError(.serviceUnavailable, code: "managed_apps_disabled", message: message)
        }
    }
}

extension Optional {
    fileprivate func unwrap(or error: @autoclosure () -> some Error) throws -> Wrapped {
        guard let self else { throw error() }
        return self
    }
}
