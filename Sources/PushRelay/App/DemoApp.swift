import Foundation

/// The app a local run gets when the configuration lists none: id `demo`, with a webhook secret
/// generated once and kept in `<data.directory>/demo-webhook-secret` (mode 0600), so the webhook URL
/// stays the same across restarts.
public enum DemoApp {
    public static let id = "demo"

    /// Loads or creates the demo app's secret.
    public static func configuration(dataDirectory: String) throws -> AppConfiguration {
        let path = (dataDirectory as NSString).appendingPathComponent("demo-webhook-secret")
        if let data = FileManager.default.contents(atPath: path) {
            let secret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if AppConfiguration.isValidWebhookSecret(secret) {
                return AppConfiguration(id: id, webhookSecrets: [secret])
            }
        }
        var generator = SystemRandomNumberGenerator()
        let secret = (0..<4).map { _ in String(format: "%016llx", generator.next() as UInt64) }.joined()
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        guard
            FileManager.default.createFile(
                atPath: path,
                contents: Data(secret.utf8),
                attributes: [.posixPermissions: 0o600]
            )
        else {
            throw ConfigurationError("cannot write \(path)")
        }
        return AppConfiguration(id: id, webhookSecrets: [secret])
    }
}
