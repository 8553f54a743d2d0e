import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StrictJSON

/// The admin API's apps (admin API keys only): every app the relay serves, and the apps managed
/// through the API, stored in PostgreSQL (``ManagedAppStore``).
///
/// - `GET /v1/admin/apps`: every app, the configuration file's (`source: file`) and the managed
///   ones (`source: managed`).
/// - `GET /v1/admin/apps/{app}`: one of them.
/// - `PUT /v1/admin/apps/{app}`: creates (201) or replaces (200) a managed app; the body is the
///   app's configuration with the YAML's key names and its credentials inline.
/// - `DELETE /v1/admin/apps/{app}`: deletes a managed app (204).
///
/// No answer carries a secret: each is shown as a ``SecretIdentifier``. The file's apps are
/// read-only (409 `app_read_only`); without `apps_store.key_file` the managed apps are off (503
/// `managed_apps_disabled`) and the list shows the file's apps.
struct AppAdminController<Context: RequestContext>: Sendable {
    /// `nil` when managed apps are off.
    let store: ManagedAppStore?
    /// The configuration file's apps, as currently loaded.
    let fileApps: @Sendable () -> [AppConfiguration]
    let authenticator: Authenticator

    /// Most bytes of a PUT body: a configuration with keys and a service account is a few KiB.
    static var maxBodyBytes: Int { 256 * 1024 }

    var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .get("/v1/admin/apps", use: list)
            .get("/v1/admin/apps/{app}", use: show)
            .put("/v1/admin/apps/{app}", use: put)
            .delete("/v1/admin/apps/{app}", use: delete)
    }

    /// An app as the admin API shows it.
    struct AppView: ResponseEncodable, Decodable, Sendable {
        var id: String
        /// `file` or `managed`.
        var source: String
        /// The configuration without its secrets (``AppConfiguration/withoutSecrets``).
        var configuration: ConfigurationView
        var secrets: [SecretIdentifier]
        /// Managed apps only: the row's version, times and the id of the key it is sealed with.
        var version: Int64?
        var createdAt: Date?
        var updatedAt: Date?
        var sealedWith: String?
        /// A managed app that is not served: why (``ManagedAppStore/Unusable``).
        var problem: String?

        enum CodingKeys: String, CodingKey {
            case id, source, configuration, secrets, version, problem
            case createdAt = "created_at"
            case updatedAt = "updated_at"
            case sealedWith = "sealed_with"
        }

        init(file app: AppConfiguration) {
            id = app.id
            source = "file"
            configuration = ConfigurationView(app.withoutSecrets)
            secrets = app.secretIdentifiers
        }

        init(managed record: ManagedAppStore.Record) {
            id = record.configuration.id
            source = "managed"
            configuration = ConfigurationView(record.configuration.withoutSecrets)
            secrets = record.configuration.secretIdentifiers
            version = record.version
            createdAt = record.createdAt
            updatedAt = record.updatedAt
            sealedWith = record.sealedWith
        }

        init(unusable app: ManagedAppStore.Unusable) {
            id = app.id
            source = "managed"
            configuration = ConfigurationView(json: "{}")
            secrets = []
            version = app.version
            updatedAt = app.updatedAt
            sealedWith = app.sealedWith
            problem = app.problem
        }
    }

    /// The configuration part of ``AppView``: written from the app, read back (by the console) as
    /// a JSON document.
    struct ConfigurationView: Codable, Sendable {
        var json: String

        init(json: String) { self.json = json }

        init(_ view: AppConfiguration.PublicView) {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            json = (try? encoder.encode(view)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        }

        init(from decoder: any Decoder) throws {
            let value = try decoder.singleValueContainer().decode(AnyJSON.self)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted]
            json = String(decoding: try encoder.encode(value), as: UTF8.self)
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(try JSONDecoder().decode(AnyJSON.self, from: Data(json.utf8)))
        }
    }

    struct AppList: ResponseEncodable, Decodable, Sendable {
        var apps: [AppView]
        /// Whether apps can be managed here (`apps_store.key_file` is set).
        var managedAppsEnabled: Bool

        enum CodingKeys: String, CodingKey {
            case apps
            case managedAppsEnabled = "managed_apps_enabled"
        }
    }

    // MARK: Routes

    /// `GET /v1/admin/apps`: the file's apps and the managed ones, sorted by id.
    @Sendable func list(_ request: Request, context: Context) async throws -> AppList {
        try await authenticator.resolve(request).requireAdmin()
        var views = fileApps().map(AppView.init(file:))
        if let store {
            let listing = try await store.records()
            views += listing.records.map(AppView.init(managed:)) + listing.unusable.map(AppView.init(unusable:))
        }
        return AppList(apps: views.sorted { $0.id < $1.id }, managedAppsEnabled: store != nil)
    }

    /// `GET /v1/admin/apps/{app}`.
    @Sendable func show(_ request: Request, context: Context) async throws -> AppView {
        try await authenticator.resolve(request).requireAdmin()
        let id = try context.pathParameter("app")
        if let app = fileApps().first(where: { $0.id == id }) { return AppView(file: app) }
        guard let record = try await requireStore().get(id) else { throw Self.notFound }
        return AppView(managed: record)
    }

    /// `PUT /v1/admin/apps/{app}`: 201 with the new app, 200 with the replaced one.
    @Sendable func put(_ request: Request, context: Context) async throws -> EditedResponse<AppView> {
        try await authenticator.resolve(request).requireAdmin()
        let id = try context.pathParameter("app")
        guard AppConfiguration.isValidID(id) else {
            throw JSONBody.invalidField(
                "app",
                "must be lower-case letters, digits, '-' or '_', starting with a letter or digit (at most 64)"
            )
        }
        if fileApps().contains(where: { $0.id == id }) { throw ManagedAppStoreError.readOnly(id) }
        let store = try requireStore()
        var request = request
        let buffer = try await request.collectJSONBytes(context: context)
        guard buffer.readableBytes <= Self.maxBodyBytes else {
            throw APIError(
                .contentTooLarge,
                code: "payload_too_large",
                message: "an app's configuration may be at most \(Self.maxBodyBytes) bytes"
            )
        }
        let app = try Self.configuration(JSONBody(buffer: buffer), id: id)
        let (record, created) = try await store.put(app)
        context.logger.notice(
            created ? "managed app created" : "managed app replaced",
            metadata: ["push.app": "\(id)", "push.app_version": "\(record.version)"]
        )
        return EditedResponse(status: created ? .created : .ok, response: AppView(managed: record))
    }

    /// `DELETE /v1/admin/apps/{app}`: 204, or 404 when there is no such managed app.
    @Sendable func delete(_ request: Request, context: Context) async throws -> Response {
        try await authenticator.resolve(request).requireAdmin()
        let id = try context.pathParameter("app")
        if fileApps().contains(where: { $0.id == id }) { throw ManagedAppStoreError.readOnly(id) }
        guard try await requireStore().delete(id) else { throw Self.notFound }
        context.logger.notice("managed app deleted", metadata: ["push.app": "\(id)"])
        return Response(status: .noContent)
    }

    // MARK: Helpers

    static var notFound: APIError { APIError(.notFound, code: "app_not_found", message: "no such app") }

    private func requireStore() throws -> ManagedAppStore {
        guard let store else { throw ManagedAppStoreError.disabled }
        return store
    }

    /// The configuration in a PUT body: the YAML's key names; `id` may be left out and must
    /// otherwise be the path's. A key the configuration does not know is refused, so a misspelt
    /// optional key (`webhook_signing_secert`) is not silently dropped.
    static func configuration(_ body: JSONBody, id: String) throws -> AppConfiguration {
        if let given = try body.optionalString("id"), given != id {
            throw JSONBody.invalidField("id", "must be the app in the path (\(id)) or be left out")
        }
        var object = body.object
        object.members.removeAll { $0.name == "id" }
        object.members.append((name: "id", value: .string(id)))
        let data = try JSONEncoder().encode(AnyJSON(.object(object)))
        let app: AppConfiguration
        do {
            app = try JSONDecoder().decode(AppConfiguration.self, from: data)
        } catch let error as DecodingError {
            throw ManagedAppStoreError(.invalid, "app '\(id)': \(AppConfiguration.describe(error))")
        }
        let known = try JSONDecoder().decode(AnyJSON.self, from: try JSONEncoder().encode(app))
        if let unknown = unknownKey(.object(object), known: known.value, path: "") {
            throw ManagedAppStoreError(.invalid, "app '\(id)': unknown key \(unknown)")
        }
        return app
    }

    /// The first key of `given` (not null) that `known`, the decoded configuration written back,
    /// lacks. Inside `fcm.service_account` any other key is allowed: a service account JSON from
    /// Google carries more fields than the relay reads.
    static func unknownKey(_ given: JSONValue, known: JSONValue, path: String) -> String? {
        guard case .object(let object) = given, path != "fcm.service_account" else { return nil }
        let knownObject = known.objectValue
        for member in object.members {
            if case .null = member.value { continue }
            let name = path.isEmpty ? member.name : "\(path).\(member.name)"
            guard let match = knownObject?[member.name] else { return name }
            if let nested = unknownKey(member.value, known: match, path: name) { return nested }
        }
        return nil
    }
}

/// Any JSON value, written and read through `Codable` (``StrictJSON``'s values carry no coding).
struct AnyJSON: Codable, Sendable {
    var value: JSONValue

    init(_ value: JSONValue) { self.value = value }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            value = .null
        } else if let bool = try? container.decode(Bool.self) {
            value = .bool(bool)
        } else if let string = try? container.decode(String.self) {
            value = .string(string)
        } else if let number = try? container.decode(Double.self) {
            value = .number(number.rounded() == number && abs(number) < 1e15 ? String(Int64(number)) : String(number))
        } else if let array = try? container.decode([AnyJSON].self) {
            value = .array(array.map(\.value))
        } else {
            let object = try decoder.container(keyedBy: NamedCodingKey.self)
            value = .object(
                JSONObject(
                    members: try object.allKeys.map {
                        (name: $0.stringValue, value: try object.decode(AnyJSON.self, forKey: $0).value)
                    }
                )
            )
        }
    }

    func encode(to encoder: any Encoder) throws {
        switch value {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let bool):
            var container = encoder.singleValueContainer()
            try container.encode(bool)
        case .string(let string):
            var container = encoder.singleValueContainer()
            try container.encode(string)
        case .number(let text):
            var container = encoder.singleValueContainer()
            if let integer = Int64(text) {
                try container.encode(integer)
            } else {
                try container.encode(Double(text) ?? 0)
            }
        case .array(let array):
            var container = encoder.unkeyedContainer()
            for element in array { try container.encode(AnyJSON(element)) }
        case .object(let object):
            var container = encoder.container(keyedBy: NamedCodingKey.self)
            for member in object.members {
                try container.encode(AnyJSON(member.value), forKey: NamedCodingKey(stringValue: member.name))
            }
        }
    }
}
