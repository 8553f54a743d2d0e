import Foundation

/// An app's FCM section.
///
/// ```yaml
/// fcm:
///   service_account_file: /etc/push-relay/support-firebase.json   # project, client_email, key, token_uri
///   # service_account: { project_id: …, client_email: …, private_key: …, token_uri: … }   # or inline
///   # url: https://localhost:8443   # another host than fcm.googleapis.com
/// ```
public struct FCMSettings: Sendable, Codable, Hashable {
    /// The service account JSON object itself (exactly one of this and ``serviceAccountFile``).
    public var inlineServiceAccount: ServiceAccount?
    public var serviceAccountFile: String?
    public var url: String?

    public init(serviceAccountFile: String, url: String? = nil) {
        self.serviceAccountFile = serviceAccountFile
        self.url = url
    }

    public init(serviceAccount: ServiceAccount, url: String? = nil) {
        self.inlineServiceAccount = serviceAccount
        self.url = url
    }

    enum CodingKeys: String, CodingKey {
        case inlineServiceAccount = "service_account"
        case serviceAccountFile = "service_account_file"
        case url
    }

    public var baseURL: String { (url ?? "https://fcm.googleapis.com").trimmingSuffix("/") }

    /// The configuration key the service account came from, for messages.
    var accountSource: String { inlineServiceAccount != nil ? "fcm.service_account" : "fcm.service_account_file" }

    /// The service account, inline or read from its file, checked.
    func serviceAccount(app: String) throws -> ServiceAccount {
        let account: ServiceAccount
        switch (inlineServiceAccount, serviceAccountFile) {
        case (nil, nil):
            throw ConfigurationError("app '\(app)': set one of fcm.service_account or fcm.service_account_file")
        case (.some, .some):
            throw ConfigurationError("app '\(app)': set only one of fcm.service_account or fcm.service_account_file")
        case (let inline?, nil):
            account = inline
        case (nil, let path?):
            let data = try ConfiguredFile.read(path, what: "app '\(app)': cannot read fcm.service_account_file")
            guard let decoded = try? JSONDecoder().decode(ServiceAccount.self, from: data) else {
                throw ConfigurationError(
                    "app '\(app)': fcm.service_account_file must be a service account JSON with project_id, client_email, private_key and token_uri"
                )
            }
            account = decoded
        }
        guard !account.projectID.isEmpty, !account.clientEmail.isEmpty, !account.privateKey.isEmpty else {
            throw ConfigurationError("app '\(app)': \(accountSource) needs a project_id, client_email and private_key")
        }
        // The token endpoint receives the signed assertion and answers with the access token: both
        // are credentials, so they never travel in clear text, whatever the JSON says.
        do {
            try validateHTTPSURL(account.tokenURI, app: app, key: "the token_uri of \(accountSource)")
        } catch {
            throw ConfigurationError(
                "app '\(app)': the token_uri of \(serviceAccountFile.map { "fcm.service_account_file \($0)" } ?? "fcm.service_account") "
                    + "must be an https URL with a host (the signed assertion and the access token travel over it)"
            )
        }
        return account
    }

    func validate(app: String) throws {
        _ = try serviceAccount(app: app)
        if let url { try validateHTTPSURL(url, app: app, key: "fcm.url") }
    }
}
