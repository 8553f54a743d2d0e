import Crypto
import Foundation
import _CryptoExtras

/// Provider credentials made up for the sandbox: an APNs `.p8` signing key and a Google service
/// account whose `token_uri` is the sandbox's `/token`. The local demo run and the tests use them so
/// that a relay delivers to the sandbox exactly as it would to Apple and Google, credentials and all.
public struct SandboxCredentials: Sendable {
    public static let apnsKeyID = "SANDBOXKEY"
    public static let apnsTeamID = "PUSHRELAY1"
    public static let fcmProjectID = "push-relay-sandbox"

    /// The APNs key, PKCS#8 PEM (what Apple's `.p8` files hold), written to ``apnsKeyFile``.
    public let apnsKeyFile: String
    /// The sandbox side of the APNs key, for ``SandboxConfiguration/apnsKeys``.
    public let apnsKey: SandboxConfiguration.APNsKey
    private let directory: String
    private let serviceAccountKeyPEM: String

    /// Generates both keys and writes the `.p8` file (mode 0600) into `directory`.
    public static func generate(directory: String) throws -> SandboxCredentials {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let (keyFile, key) = try generateAPNsKey(keyID: apnsKeyID, teamID: apnsTeamID, directory: directory)
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        return SandboxCredentials(
            apnsKeyFile: keyFile,
            apnsKey: key,
            directory: directory,
            serviceAccountKeyPEM: rsa.pemRepresentation
        )
    }

    /// A new APNs signing key: its `.p8` file `AuthKey_{keyID}.p8` (mode 0600) in `directory`,
    /// and its sandbox side for ``SandboxConfiguration/apnsKeys`` under `keyID`.
    public static func generateAPNsKey(
        keyID: String,
        teamID: String,
        directory: String
    ) throws -> (keyFile: String, key: SandboxConfiguration.APNsKey) {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let apns = P256.Signing.PrivateKey()
        let keyFile = (directory as NSString).appendingPathComponent("AuthKey_\(keyID).p8")
        try write(apns.pemRepresentation, to: keyFile)
        return (keyFile, .init(teamID: teamID, publicKeyPEM: apns.publicKey.pemRepresentation))
    }

    /// The sandbox's APNs keys, keyed by key id.
    public var apnsKeys: [String: SandboxConfiguration.APNsKey] { [Self.apnsKeyID: apnsKey] }

    /// Writes a service account JSON whose OAuth exchange goes to `sandboxURL/token`; returns its
    /// path, which is new for each call (several sandboxes may share one set of credentials).
    public func writeServiceAccount(sandboxURL: String) throws -> String {
        let account: [String: String] = [
            "type": "service_account",
            "project_id": Self.fcmProjectID,
            "client_email": "push-relay@\(Self.fcmProjectID).iam.gserviceaccount.com",
            "private_key": serviceAccountKeyPEM,
            "token_uri": "\(sandboxURL)/token",
        ]
        let path = (directory as NSString).appendingPathComponent("service-account-\(UUID().uuidString.prefix(8).lowercased()).json")
        let data = try JSONSerialization.data(withJSONObject: account, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        try Self.write(String(decoding: data, as: UTF8.self), to: path)
        return path
    }

    private static func write(_ text: String, to path: String) throws {
        _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        guard let handle = FileHandle(forWritingAtPath: path) else { throw CocoaError(.fileWriteNoPermission) }
        defer { try? handle.close() }
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data(text.utf8))
    }
}
