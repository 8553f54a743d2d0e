import CurlHTTP2
import Foundation

/// Every app's APNs and FCM providers, built once at start-up.
///
/// One ``HTTP2Client`` (one libcurl multi handle, so one connection pool) per credential: APNs binds
/// a connection to one team, so apps sharing a key share a client and apps with different keys
/// never share a connection. Likewise one token manager per APNs key and per service account, its
/// token shared with the other instances through `tokens` when given.
final class ProviderSet: Sendable {
    private let providers: [String: (apns: (any PushProvider)?, fcm: (any PushProvider)?)]
    private let clients: [HTTP2Client]

    init(apps: [AppConfiguration], settings: DeliverySettings, tokens: ProviderTokenStore? = nil) async throws {
        var clients: [String: HTTP2Client] = [:]
        var apnsManagers: [String: APNsTokenManager] = [:]
        var fcmManagers: [String: FCMAccessTokenManager] = [:]
        func client(_ key: String, certificate: HTTP2ClientConfiguration.ClientCertificate? = nil) throws -> HTTP2Client {
            if let existing = clients[key] { return existing }
            let created = try HTTP2Client(
                configuration: .init(
                    maxConnectionsPerHost: settings.connectionsPerHost,
                    maxConcurrentStreams: settings.streamsPerConnection,
                    caFile: settings.caFile,
                    clientCertificate: certificate,
                    eventThreads: settings.eventThreads
                )
            )
            clients[key] = created
            return created
        }
        var providers: [String: (apns: (any PushProvider)?, fcm: (any PushProvider)?)] = [:]
        do {
            for app in apps {
                var apns: (any PushProvider)?
                var fcm: (any PushProvider)?
                if let apnsSettings = app.apns {
                    if let token = apnsSettings.token {
                        let pem = try token.privateKeyPEM(app: app.id)
                        let manager: APNsTokenManager
                        do {
                            if let existing = apnsManagers["\(token.teamID):\(token.keyID)"] {
                                manager = existing
                            } else {
                                manager = try await APNsTokenManager(
                                    privateKeyPEM: pem,
                                    keyID: token.keyID,
                                    teamID: token.teamID,
                                    store: tokens
                                )
                            }
                        } catch {
                            throw ConfigurationError("app '\(app.id)': \(token.keySource) is not a PKCS#8 P-256 key (.p8)")
                        }
                        apnsManagers["\(token.teamID):\(token.keyID)"] = manager
                        apns = APNsProvider(
                            settings: apnsSettings,
                            client: try client("apns-token:\(token.teamID):\(token.keyID)"),
                            tokens: manager,
                            pushTTL: settings.pushTTL,
                            timeout: settings.requestTimeout
                        )
                    } else if let certificate = apnsSettings.certificate {
                        let identity = HTTP2ClientConfiguration.ClientCertificate(
                            path: certificate.file,
                            type: certificate.resolvedType,
                            keyPath: certificate.keyFile,
                            password: try apnsSettings.certificatePassword()
                        )
                        apns = APNsProvider(
                            settings: apnsSettings,
                            client: try client("apns-certificate:\(certificate.file)", certificate: identity),
                            tokens: nil,
                            pushTTL: settings.pushTTL,
                            timeout: settings.requestTimeout
                        )
                    }
                }
                if let fcmSettings = app.fcm {
                    let account = try fcmSettings.serviceAccount(app: app.id)
                    let http = try client("fcm:\(account.projectID):\(account.clientEmail)")
                    let manager: FCMAccessTokenManager
                    do {
                        if let existing = fcmManagers[account.clientEmail] {
                            manager = existing
                        } else {
                            manager = try await FCMAccessTokenManager(
                                account: account,
                                exchange: FCMProvider.exchange(client: http, timeout: settings.requestTimeout),
                                store: tokens
                            )
                        }
                    } catch {
                        throw ConfigurationError("app '\(app.id)': the private_key of \(fcmSettings.accountSource) is not an RSA key")
                    }
                    fcmManagers[account.clientEmail] = manager
                    fcm = FCMProvider(
                        settings: fcmSettings,
                        projectID: account.projectID,
                        client: http,
                        tokens: manager,
                        pushTTL: settings.pushTTL,
                        timeout: settings.requestTimeout
                    )
                }
                providers[app.id] = (apns, fcm)
            }
        } catch {
            for client in clients.values { await client.shutdown() }
            throw error
        }
        self.providers = providers
        self.clients = Array(clients.values)
    }

    /// The provider for a delivery, or `nil` when the app has no section for that platform.
    func provider(app: String, platform: Platform) -> (any PushProvider)? {
        switch platform {
        case .ios: providers[app]?.apns
        case .android: providers[app]?.fcm
        }
    }

    /// Closes every connection; in-flight requests fail.
    func shutdown() async {
        for client in clients { await client.shutdown() }
    }
}
