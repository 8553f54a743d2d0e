import Foundation

/// An app's FCM section.
///
/// ```yaml
/// fcm:
///   service_account_file: /etc/push-relay/support-firebase.json   # project, client_email, key, token_uri
///   # url: https://localhost:8443   # another host than fcm.googleapis.com
/// ```
public struct FCMSettings: Sendable, Decodable, Hashable {
    public var serviceAccountFile: String
    public var url: String?

    public init(serviceAccountFile: String, url: String? = nil) {
        self.serviceAccountFile = serviceAccountFile
        self.url = url
    }

    enum CodingKeys: String, CodingKey {
        case serviceAccountFile = "service_account_file"
        case url
    }

    public var baseURL: String { (url ?? "https://fcm.googleapis.com").trimmingSuffix("/") }

    /// Reads and checks the service account JSON.
    func serviceAccount(app: String) throws -> ServiceAccount {
        guard let data = FileManager.default.contents(atPath: serviceAccountFile) else {
            throw ConfigurationError("app '\(app)': cannot read fcm.service_account_file \(serviceAccountFile)")
        }
        guard let account = try? JSONDecoder().decode(ServiceAccount.self, from: data) else {
            throw ConfigurationError(
                "app '\(app)': fcm.service_account_file must be a service account JSON with project_id, client_email, private_key and token_uri"
            )
        }
        // The token endpoint receives the signed assertion and answers with the access token: both
        // are credentials, so they never travel in clear text, whatever the JSON file says.
        do {
            try validateHTTPSURL(account.tokenURI, app: app, key: "the token_uri of fcm.service_account_file")
        } catch {
            throw ConfigurationError(
                "app '\(app)': the token_uri of fcm.service_account_file \(serviceAccountFile) must be an https URL with a host "
                    + "(the signed assertion and the access token travel over it)"
            )
        }
        return account
    }

    func validate(app: String) throws {
        _ = try serviceAccount(app: app)
        if let url { try validateHTTPSURL(url, app: app, key: "fcm.url") }
    }
}
