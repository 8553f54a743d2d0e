import Foundation

/// Settings of the sandbox.
public struct SandboxConfiguration: Sendable {
    public var host: String
    /// 0 picks a free port (read it from `onServerRunning`).
    public var port: Int
    /// Where the CA certificate is written.
    public var directory: String
    /// APNs signing keys the sandbox accepts, by key id. Empty: any bearer token is accepted.
    public var apnsKeys: [String: APNsKey]
    /// Google service accounts whose OAuth assertions `POST /token` accepts: the RSA public key
    /// (PEM) by `client_email`. Empty: any well-formed assertion with the FCM scope is accepted.
    public var serviceAccountKeys: [String: String]
    /// Keep the CA of an earlier run found in ``directory`` (`sandbox-ca.pem` and its key
    /// `sandbox-ca-key.pem`, mode 0600) instead of making a new one, so relays that trust it go on
    /// trusting the sandbox after a restart. Off: a new CA for each start, and no key written.
    public var keepsCertificateAuthority: Bool

    /// A team's public key (PEM) for checking provider JWTs.
    public struct APNsKey: Sendable {
        public var teamID: String
        public var publicKeyPEM: String
        /// `production` or `sandbox` for a key Apple issued for one environment only: a token
        /// signed with it on the other environment's host gets 403 `BadEnvironmentKeyInToken`.
        /// `nil`: both environments.
        public var environment: String?
        public init(teamID: String, publicKeyPEM: String, environment: String? = nil) {
            self.teamID = teamID
            self.publicKeyPEM = publicKeyPEM
            self.environment = environment
        }
    }

    /// The secret feedback events must be signed with (`POST /events…`); `nil`: the receiver
    /// answers 401 to every request.
    public var eventSigningSecret: String?
    /// Offer HTTP/1.1 alone (ALPN `http/1.1`) instead of HTTP/2: a customer's events receiver
    /// that does not speak HTTP/2. APNs and FCM clients need HTTP/2.
    public var http1Only: Bool

    public init(
        host: String = "127.0.0.1",
        port: Int = 0,
        directory: String,
        apnsKeys: [String: APNsKey] = [:],
        serviceAccountKeys: [String: String] = [:],
        eventSigningSecret: String? = nil,
        http1Only: Bool = false,
        keepsCertificateAuthority: Bool = false
    ) {
        self.eventSigningSecret = eventSigningSecret
        self.http1Only = http1Only
        self.host = host
        self.port = port
        self.directory = directory
        self.apnsKeys = apnsKeys
        self.serviceAccountKeys = serviceAccountKeys
        self.keepsCertificateAuthority = keepsCertificateAuthority
    }
}
