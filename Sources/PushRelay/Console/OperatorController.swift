import Crypto
import Foundation
import Hummingbird
import Postgres

/// The operator API the console's Overview and Apps pages read (and any other client may):
/// `GET /v1/overview` (activity over the last hour, queues and backlogs per app) and `GET /v1/apps`
/// (each app's configuration as loaded, each secret shown as a ``SecretIdentifier``, and its
/// credentials' state).
///
/// An admin key sees every app; an app key sees its own app only. User tokens are refused (401:
/// these routes name no app).
struct OperatorController<Context: RequestContext>: Sendable {
    let store: OperatorStore
    let apps: AppDirectory
    let authenticator: Authenticator

    /// Queue and backlog counts stop at this many rows, so a huge backlog costs a bounded read.
    static var countCap: Int { 100_000 }

    var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .get("/v1/overview", use: overview)
            .get("/v1/apps", use: list)
    }

    /// The apps a principal may look at, sorted.
    func visibleApps(_ principal: Principal) throws -> [String] {
        switch principal {
        case .admin: return apps.ids
        case .app(let id, _): return apps.ids.filter { $0 == id }
        case .user: throw Authenticator.forbidden("this operation needs an API key")
        }
    }

    // MARK: Overview

    /// One minute's (or the hour's) counts, as the overview answers them.
    typealias Activity = ActivityTally.Counts

    struct Minute: Encodable, Sendable {
        var minute: Date
        var activity: Activity

        func encode(to encoder: any Encoder) throws {
            try activity.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(minute, forKey: .minute)
        }
        enum Key: String, CodingKey { case minute }
    }

    struct Queue: Codable, Sendable {
        var pending: Int
        var sending: Int
        var retrying: Int
    }

    struct AppOverview: Codable, Sendable {
        var app: String
        var minutes: [Minute]
        var lastHour: Activity
        var queue: Queue
        var zendeskBacklog: Int
        var eventsBacklog: Int

        enum CodingKeys: String, CodingKey {
            case app, minutes, queue
            case lastHour = "last_hour"
            case zendeskBacklog = "zendesk_backlog"
            case eventsBacklog = "events_backlog"
        }
    }

    struct Overview: ResponseEncodable, Decodable {
        var generatedAt: Date
        var countCap: Int
        var apps: [AppOverview]

        enum CodingKeys: String, CodingKey {
            case apps
            case generatedAt = "generated_at"
            case countCap = "count_cap"
        }
    }

    /// `GET /v1/overview`.
    @Sendable func overview(_ request: Request, context: Context) async throws -> Overview {
        let visible = try visibleApps(try await authenticator.resolve(request))
        let now = Date()
        let current = ActivityTally.minute(now)
        let first = current - 59 * 60
        let minutes = try await store.activity(apps: visible, from: first)
        let depths = try await store.depths(apps: visible, cap: Self.countCap)
        let answer = visible.map { app in
            let series = stride(from: first, through: current, by: 60).map { minute in
                Minute(
                    minute: Date(timeIntervalSince1970: TimeInterval(minute)),
                    activity: minutes[app]?[minute] ?? Activity()
                )
            }
            let depth = depths[app] ?? OperatorStore.Depths()
            return AppOverview(
                app: app,
                minutes: series,
                lastHour: series.reduce(Activity()) { $0 + $1.activity },
                queue: Queue(pending: depth.pending, sending: depth.sending, retrying: depth.retrying),
                zendeskBacklog: depth.zendesk,
                eventsBacklog: depth.events
            )
        }
        return Overview(generatedAt: now, countCap: Self.countCap, apps: answer)
    }

    // MARK: Apps

    struct Credential: Codable, Sendable {
        var platform: String
        /// How the relay authenticates: `token` (APNs .p8), `certificate` (APNs), `service_account` (FCM).
        var kind: String
        /// The provider-token store's name for it (`apns:TEAM:KEY`, `fcm:EMAIL`), when it has tokens.
        var name: String?
        var lastRefresh: Date?
        var expiresAt: Date?
        var lastRejection: Rejection?

        struct Rejection: Codable, Sendable {
            var at: Date
            var reason: String
        }

        enum CodingKeys: String, CodingKey {
            case platform, kind, name
            case lastRefresh = "last_refresh"
            case expiresAt = "expires_at"
            case lastRejection = "last_rejection"
        }
    }

    struct AppView: Codable, Sendable {
        var id: String
        var webhookSecrets: [SecretIdentifier]
        var webhookSigningSecret: SecretIdentifier?
        /// Every secret of the app (those above, keys, tokens), as identifiers.
        var secrets: [SecretIdentifier]
        var userTokens: [String: String]?
        var apns: [String: String]?
        var fcm: [String: String]?
        var zendesk: [String: String]?
        var events: EventsView?
        /// The app's `push` section as configured (absent: full text, grouped by ticket).
        var push: PushSettings?
        var credentials: [Credential]

        struct EventsView: Codable, Sendable {
            var url: String
            var signingSecretFile: String?
            var types: [String]
            enum CodingKeys: String, CodingKey {
                case url, types
                case signingSecretFile = "signing_secret_file"
            }
        }

        enum CodingKeys: String, CodingKey {
            case id, apns, fcm, zendesk, events, credentials, secrets, push
            case webhookSecrets = "webhook_secrets"
            case webhookSigningSecret = "webhook_signing_secret"
            case userTokens = "user_tokens"
        }
    }

    struct AppList: ResponseEncodable {
        var apps: [AppView]
    }

    /// `GET /v1/apps`.
    @Sendable func list(_ request: Request, context: Context) async throws -> AppList {
        let visible = try visibleApps(try await authenticator.resolve(request))
        var views = visible.compactMap { id in apps.app(id).map { Self.view(of: $0, id: id) } }
        try await addCredentialState(to: &views, apps: visible)
        return AppList(apps: views)
    }

    /// An app's configuration as the API shows it (secrets as fingerprints, key files by path), with
    /// its credentials but not their state yet.
    static func view(of app: AppConfiguration, id: String) -> AppView {
        var credentials: [Credential] = []
        let apns = app.apns.map { apnsFields($0, app: id, credentials: &credentials) }
        let fcm = app.fcm.map { fcmFields($0, app: id, credentials: &credentials) }
        let secrets = app.secretIdentifiers
        return AppView(
            id: id,
            webhookSecrets: secrets.filter { $0.label.hasPrefix("webhook_secrets[") },
            webhookSigningSecret: secrets.first { $0.label == "webhook_signing_secret" },
            secrets: secrets,
            userTokens: app.userTokens.map { ["secret_file": $0.secretFile ?? "(inline)"] },
            apns: apns,
            fcm: fcm,
            zendesk: app.zendesk.map {
                ["url": $0.baseURL, "email": $0.email, "api_token_file": $0.apiTokenFile ?? "(inline)"]
            },
            events: app.events.map {
                AppView.EventsView(
                    url: $0.url,
                    signingSecretFile: $0.signingSecretFile,
                    types: $0.eventTypes.map(\.rawValue).sorted()
                )
            },
            push: app.push,
            credentials: credentials
        )
    }

    /// The `apns` section's fields; its credential is added to `credentials`.
    private static func apnsFields(
        _ settings: APNsSettings,
        app id: String,
        credentials: inout [Credential]
    ) -> [String: String] {
        var fields = [
            "topic": settings.topic, "environment": settings.environment.rawValue, "url": settings.baseURL,
        ]
        if let token = settings.token {
            fields.merge([
                "auth": "token", "team_id": token.teamID, "key_id": token.keyID,
                "key_file": token.keyFile ?? "(inline)",
            ]) { $1 }
            // The shared token's key names the key by fingerprint too (``ProviderTokenStore``).
            let key = (try? token.privateKeyPEM(app: id)).flatMap {
                try? P256.Signing.PrivateKey(pemRepresentation: $0)
            }
            let name = key.map {
                ProviderTokenStore.credentialName("apns:\(token.teamID):\(token.keyID)", key: $0)
            }
            credentials.append(Credential(platform: "ios", kind: "token", name: name))
        } else if let certificate = settings.certificate {
            fields.merge(["auth": "certificate", "certificate_file": certificate.file]) { $1 }
            credentials.append(Credential(platform: "ios", kind: "certificate"))
        }
        return fields
    }

    /// The `fcm` section's fields; its credential is added to `credentials`.
    private static func fcmFields(
        _ settings: FCMSettings,
        app id: String,
        credentials: inout [Credential]
    ) -> [String: String] {
        var fields = [
            "url": settings.baseURL, "service_account_file": settings.serviceAccountFile ?? "(inline)",
        ]
        let account = try? settings.serviceAccount(app: id)
        if let account { fields["project_id"] = account.projectID }
        credentials.append(
            Credential(
                platform: "android",
                kind: "service_account",
                name: account.map {
                    ProviderTokenStore.credentialName("fcm:\($0.clientEmail)", material: $0.privateKey)
                }
            )
        )
        return fields
    }

    /// Each credential's token state (refreshes are shared by the cluster) and the last rejection
    /// of each app's platform.
    private func addCredentialState(to views: inout [AppView], apps visible: [String]) async throws {
        let refreshed = try await store.tokenRefreshes(credentials: views.flatMap { $0.credentials.compactMap(\.name) })
        var rejections: [String: Credential.Rejection] = [:]
        for rejection in try await store.rejections(apps: visible) {
            rejections["\(rejection.app) \(rejection.platform)"] = Credential.Rejection(
                at: rejection.at,
                reason: rejection.reason
            )
        }
        for index in views.indices {
            for credential in views[index].credentials.indices {
                let entry = views[index].credentials[credential]
                if let name = entry.name, let (issued, expires) = refreshed[name] {
                    views[index].credentials[credential].lastRefresh = issued
                    views[index].credentials[credential].expiresAt = expires
                }
                views[index].credentials[credential].lastRejection = rejections["\(views[index].id) \(entry.platform)"]
            }
        }
    }
}
