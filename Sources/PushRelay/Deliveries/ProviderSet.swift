import Crypto
import CurlHTTP2
import Foundation
import Synchronization

/// Every app's APNs and FCM providers, built at start-up and rebuilt by a reload.
///
/// One ``HTTP2Client`` (one libcurl multi handle, so one connection pool) per credential: APNs binds
/// a connection to one team, so apps sharing a key share a client and apps with different keys
/// never share a connection. Likewise one token manager per APNs key and per service account, its
/// token shared with the other instances through `tokens` when given.
///
/// A reload (``prepare(apps:)`` then ``install(_:)``) keeps the clients and token managers of
/// credentials that did not change, so their connections and tokens carry on. A credential that
/// changed gets new ones (its token manager is named by the credential's fingerprint, so no token
/// of the old key is reused). Clients no longer used are closed only after ``retireAfter``: a send
/// that started with the old credential finishes with it.
final class ProviderSet: Sendable {
    typealias Pair = (apns: (any PushProvider)?, fcm: (any PushProvider)?)

    /// A complete set of providers, built before it replaces the one in use.
    struct Built: Sendable {
        fileprivate var providers: [String: Pair] = [:]
        fileprivate var clients: [String: HTTP2Client] = [:]
        fileprivate var apnsManagers: [String: APNsTokenManager] = [:]
        fileprivate var fcmManagers: [String: FCMAccessTokenManager] = [:]
    }

    private let settings: DeliverySettings
    private let tokens: ProviderTokenStore?
    /// Opens devices' push keys for `encrypted` apps.
    private let deviceKeys: DevicePushKeys
    private let current: Mutex<Built>
    /// Clients replaced by a reload and not closed yet.
    private let retiring = Mutex<[ObjectIdentifier: HTTP2Client]>([:])
    /// How long a replaced client stays open for the sends that use it: two requests (a send may
    /// make a second one with a new token) and some slack.
    var retireAfter: Duration { settings.requestTimeout * 2 + .seconds(5) }

    init(
        apps: [AppConfiguration],
        settings: DeliverySettings,
        tokens: ProviderTokenStore? = nil,
        deviceKeys: DevicePushKeys = DevicePushKeys()
    ) async throws {
        self.settings = settings
        self.tokens = tokens
        self.deviceKeys = deviceKeys
        current = Mutex(
            try await Self.build(
                apps: apps,
                settings: settings,
                tokens: tokens,
                deviceKeys: deviceKeys,
                reusing: Built()
            )
        )
    }

    /// Builds the providers of `apps`, reusing the clients and token managers of unchanged
    /// credentials; nothing in use changes until ``install(_:)``. Throws what a credential's
    /// files refuse, having closed the clients it made.
    func prepare(apps: [AppConfiguration]) async throws -> Built {
        try await Self.build(
            apps: apps,
            settings: settings,
            tokens: tokens,
            deviceKeys: deviceKeys,
            reusing: current.withLock { $0 }
        )
    }

    /// Puts `built` in use; clients it no longer uses are closed after ``retireAfter``.
    func install(_ built: Built) {
        let old = current.withLock { current in
            defer { current = built }
            return current
        }
        let kept = Set(built.clients.values.map(ObjectIdentifier.init))
        let unused = old.clients.values.filter { !kept.contains(ObjectIdentifier($0)) }
        guard !unused.isEmpty else { return }
        retiring.withLock { retiring in
            for client in unused { retiring[ObjectIdentifier(client)] = client }
        }
        let delay = retireAfter
        Task {
            try? await Task.sleep(for: delay)
            for client in unused {
                guard retiring.withLock({ $0.removeValue(forKey: ObjectIdentifier(client)) }) != nil else { continue }
                await client.shutdown()
            }
        }
    }

    /// Closes the clients `built` made that the set in use does not share (a prepared set that
    /// is not installed).
    func discard(_ built: Built) async {
        let used = Set(current.withLock { $0.clients.values.map(ObjectIdentifier.init) })
        for client in built.clients.values where !used.contains(ObjectIdentifier(client)) { await client.shutdown() }
    }

    private static func build(
        apps: [AppConfiguration],
        settings: DeliverySettings,
        tokens: ProviderTokenStore?,
        deviceKeys: DevicePushKeys,
        reusing old: Built
    ) async throws -> Built {
        let builder = Builder(settings: settings, tokens: tokens, old: old)
        do {
            for app in apps {
                // The app's push settings go with its providers, so a reload changes them at once.
                let presentation = PushPresentation(app.push)
                var pair: Pair = (nil, nil)
                if let apns = app.apns, var provider = try await builder.apns(apns, app: app.id) {
                    provider.presentation = presentation
                    provider.deviceKeys = deviceKeys
                    pair.apns = provider
                }
                if let fcm = app.fcm {
                    var provider = try await builder.fcm(fcm, app: app.id)
                    provider.presentation = presentation
                    provider.deviceKeys = deviceKeys
                    pair.fcm = provider
                }
                builder.built.providers[app.id] = pair
            }
        } catch {
            for client in builder.made { await client.shutdown() }
            throw error
        }
        return builder.built
    }

    /// Makes a set's providers, reusing the HTTP/2 clients and token managers of the set in use
    /// (`old`) for credentials that did not change, and of the set being built for apps that
    /// share a credential.
    private final class Builder {
        let settings: DeliverySettings
        let tokens: ProviderTokenStore?
        let old: Built
        var built = Built()
        /// The clients made here, closed if the set is not finished.
        var made: [HTTP2Client] = []

        init(settings: DeliverySettings, tokens: ProviderTokenStore?, old: Built) {
            self.settings = settings
            self.tokens = tokens
            self.old = old
        }

        /// The client named `key`: one per credential, so credentials never share a connection.
        func client(_ key: String, certificate: HTTP2ClientConfiguration.ClientCertificate? = nil) throws -> HTTP2Client
        {
            if let existing = built.clients[key] ?? old.clients[key] {
                built.clients[key] = existing
                return existing
            }
            let created = try HTTP2Client(
                configuration: .init(
                    maxConnectionsPerHost: settings.connectionsPerHost,
                    maxConcurrentStreams: settings.streamsPerConnection,
                    caFile: settings.caFile,
                    clientCertificate: certificate,
                    eventThreads: settings.eventThreads
                )
            )
            made.append(created)
            built.clients[key] = created
            return created
        }

        func apns(_ apns: APNsSettings, app: String) async throws -> APNsProvider? {
            if let token = apns.token {
                let pem = try token.privateKeyPEM(app: app)
                guard let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) else {
                    throw ConfigurationError("app '\(app)': \(token.keySource) is not a PKCS#8 P-256 key (.p8)")
                }
                let name = ProviderTokenStore.credentialName("apns:\(token.teamID):\(token.keyID)", key: key)
                let manager: APNsTokenManager
                if let existing = built.apnsManagers[name] ?? old.apnsManagers[name] {
                    manager = existing
                } else {
                    manager = try await APNsTokenManager(
                        privateKeyPEM: pem,
                        keyID: token.keyID,
                        teamID: token.teamID,
                        store: tokens
                    )
                }
                built.apnsManagers[name] = manager
                return APNsProvider(
                    settings: apns,
                    client: try client("apns-token:\(token.teamID):\(token.keyID)"),
                    tokens: manager,
                    pushTTL: settings.pushTTL,
                    timeout: settings.requestTimeout
                )
            }
            guard let certificate = apns.certificate else { return nil }
            let identity = HTTP2ClientConfiguration.ClientCertificate(
                path: certificate.file,
                type: certificate.resolvedType,
                keyPath: certificate.keyFile,
                password: try apns.certificatePassword()
            )
            // Named by the files' content too: a certificate replaced at the same path gets a
            // client (and TLS connections) of its own.
            let content = [certificate.file, certificate.keyFile].compactMap { $0 }.map { path in
                FileManager.default.contents(atPath: path).map {
                    SecretIdentifier.fingerprint(String(decoding: $0, as: UTF8.self))
                } ?? "-"
            }
            let password = identity.password.map { SecretIdentifier.fingerprint($0) } ?? ""
            return APNsProvider(
                settings: apns,
                client: try client(
                    "apns-certificate:\(certificate.file):\(content.joined(separator: ",")):\(password)",
                    certificate: identity
                ),
                tokens: nil,
                pushTTL: settings.pushTTL,
                timeout: settings.requestTimeout
            )
        }

        func fcm(_ fcm: FCMSettings, app: String) async throws -> FCMProvider {
            let account = try fcm.serviceAccount(app: app)
            let http = try client("fcm:\(account.projectID):\(account.clientEmail):\(account.tokenURI)")
            let name = ProviderTokenStore.credentialName("fcm:\(account.clientEmail)", material: account.privateKey)
            let manager: FCMAccessTokenManager
            if let existing = built.fcmManagers[name] ?? old.fcmManagers[name] {
                manager = existing
            } else {
                do {
                    manager = try await FCMAccessTokenManager(
                        account: account,
                        exchange: FCMProvider.exchange(client: http, timeout: settings.requestTimeout),
                        store: tokens
                    )
                } catch {
                    throw ConfigurationError(
                        "app '\(app)': the private_key of fcm.service_account_file is not an RSA key"
                    )
                }
            }
            built.fcmManagers[name] = manager
            return FCMProvider(
                settings: fcm,
                projectID: account.projectID,
                client: http,
                tokens: manager,
                pushTTL: settings.pushTTL,
                timeout: settings.requestTimeout
            )
        }
    }

    /// The provider for a delivery, or `nil` when the app has no section for that platform.
    func provider(app: String, platform: Platform) -> (any PushProvider)? {
        current.withLock { current in
            switch platform {
            case .ios: current.providers[app]?.apns
            case .android: current.providers[app]?.fcm
            }
        }
    }

    /// Whether `app` is configured (a reload may have removed it since its deliveries were claimed).
    func knows(app: String) -> Bool { current.withLock { $0.providers[app] != nil } }

    /// Closes every connection; in-flight requests fail.
    func shutdown() async {
        let clients =
            current.withLock { Array($0.clients.values) }
            + retiring.withLock { retiring in
                defer { retiring = [:] }
                return Array(retiring.values)
            }
        for client in clients { await client.shutdown() }
    }
}
