import Foundation

/// Checks a configured provider URL: https with a host, or a configuration error naming `app` and `key`.
func validateHTTPSURL(_ url: String, app: String, key: String) throws {
    guard let components = URLComponents(string: url), components.scheme == "https", components.host?.isEmpty == false
    else {
        throw ConfigurationError("app '\(app)': \(key) must be an https URL")
    }
}
