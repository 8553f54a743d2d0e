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
    /// The service account's `client_email`.
    public static let fcmClientEmail = "push-relay@\(fcmProjectID).iam.gserviceaccount.com"
    /// The file name ``open(directory:)`` keeps the service account under.
    public static let serviceAccountFileName = "service-account.json"

    /// The APNs key, PKCS#8 PEM (what Apple's `.p8` files hold), written to ``apnsKeyFile``.
    public let apnsKeyFile: String
    /// The sandbox side of the APNs key, for ``SandboxConfiguration/apnsKeys``.
    public let apnsKey: SandboxConfiguration.APNsKey
    private let directory: String
    private let serviceAccountKeyPEM: String
    private let serviceAccountPublicKeyPEM: String

    /// Generates both keys and writes the `.p8` file (mode 0600) into `directory`.
    public static func generate(directory: String) throws -> SandboxCredentials {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let (keyFile, key) = try generateAPNsKey(keyID: apnsKeyID, teamID: apnsTeamID, directory: directory)
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        return SandboxCredentials(
            apnsKeyFile: keyFile,
            apnsKey: key,
            directory: directory,
            serviceAccountKeyPEM: rsa.pemRepresentation,
            serviceAccountPublicKeyPEM: rsa.publicKey.pemRepresentation
        )
    }

    /// The credentials kept in `directory`, made on first use: the APNs key `AuthKey_{apnsKeyID}.p8`
    /// and the service account's private key in ``serviceAccountFileName`` are read back when
    /// present, so a configuration pointing at them keeps working when the sandbox restarts, and
    /// generated otherwise (the `.p8` is written at once, mode 0600; the service account by
    /// ``writeServiceAccount(sandboxURL:fileName:)``).
    public static func open(directory: String) throws -> SandboxCredentials {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let keyFile = (directory as NSString).appendingPathComponent("AuthKey_\(apnsKeyID).p8")
        let accountFile = (directory as NSString).appendingPathComponent(serviceAccountFileName)
        let apnsKey: SandboxConfiguration.APNsKey
        if FileManager.default.fileExists(atPath: keyFile) {
            do {
                let key = try P256.Signing.PrivateKey(pemRepresentation: String(contentsOfFile: keyFile, encoding: .utf8))
                apnsKey = .init(teamID: apnsTeamID, publicKeyPEM: key.publicKey.pemRepresentation)
            } catch {
                throw CredentialsError(description: "\(keyFile) is not a PKCS#8 P-256 key (delete it to have a new one made)")
            }
        } else {
            apnsKey = try generateAPNsKey(keyID: apnsKeyID, teamID: apnsTeamID, directory: directory).key
        }
        let rsa: _RSA.Signing.PrivateKey
        if FileManager.default.fileExists(atPath: accountFile) {
            let data = FileManager.default.contents(atPath: accountFile) ?? Data()
            let account = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
            guard let pem = account?["private_key"] as? String, let key = try? _RSA.Signing.PrivateKey(pemRepresentation: pem) else {
                throw CredentialsError(description: "\(accountFile) holds no RSA private_key (delete it to have a new one made)")
            }
            rsa = key
        } else {
            rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        }
        return SandboxCredentials(
            apnsKeyFile: keyFile,
            apnsKey: apnsKey,
            directory: directory,
            serviceAccountKeyPEM: rsa.pemRepresentation,
            serviceAccountPublicKeyPEM: rsa.publicKey.pemRepresentation
        )
    }

    /// A credentials file that cannot be read back.
    public struct CredentialsError: Error, CustomStringConvertible {
        public var description: String
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
        try writePrivate(apns.pemRepresentation, to: keyFile)
        return (keyFile, .init(teamID: teamID, publicKeyPEM: apns.publicKey.pemRepresentation))
    }

    /// The sandbox's APNs keys, keyed by key id.
    public var apnsKeys: [String: SandboxConfiguration.APNsKey] { [Self.apnsKeyID: apnsKey] }

    /// The service account's public key, for ``SandboxConfiguration/serviceAccountKeys``.
    public var serviceAccountKeys: [String: String] { [Self.fcmClientEmail: serviceAccountPublicKeyPEM] }

    /// Writes a service account JSON (mode 0600) whose OAuth exchange goes to `sandboxURL/token`
    /// and returns its path: `directory/fileName`, or a new file for each call when `fileName` is
    /// nil (several sandboxes may share one set of credentials).
    public func writeServiceAccount(sandboxURL: String, fileName: String? = nil) throws -> String {
        let account: [String: String] = [
            "type": "service_account",
            "project_id": Self.fcmProjectID,
            "client_email": Self.fcmClientEmail,
            "private_key": serviceAccountKeyPEM,
            "token_uri": "\(sandboxURL)/token",
        ]
        let name = fileName ?? "service-account-\(UUID().uuidString.prefix(8).lowercased()).json"
        let path = (directory as NSString).appendingPathComponent(name)
        let data = try JSONSerialization.data(withJSONObject: account, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        try Self.writePrivate(String(decoding: data, as: UTF8.self), to: path)
        return path
    }

    /// Writes `text` to `path`, which is made mode 0600 before anything is written to it.
    static func writePrivate(_ text: String, to path: String) throws {
        _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        guard let handle = FileHandle(forWritingAtPath: path) else { throw CocoaError(.fileWriteNoPermission) }
        defer { try? handle.close() }
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data(text.utf8))
    }
}
