import Configuration
import Crypto
import Foundation

/// Compares two secrets' digests without an early exit on the first differing byte, so the time
/// taken says nothing about how much of a guess was right. Different lengths are unequal.
func constantTimeEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    guard lhs.count == rhs.count else { return false }
    var difference: UInt8 = 0
    for (a, b) in zip(lhs, rhs) { difference |= a ^ b }
    return difference == 0
}

/// The secret in a file named by an app's configuration, trimmed of surrounding whitespace and
/// newlines; start-up stops with a message naming the app and `key` when the file cannot be read
/// or the secret is shorter than `minBytes`.
func readSecretFile(
    _ path: String,
    app: String,
    key: String,
    minBytes: Int,
    what: String = "the secret"
) throws -> String {
    let data = try ConfiguredFile.read(path, what: "app '\(app)': cannot read \(key)")
    let secret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    guard secret.utf8.count >= minBytes else {
        throw ConfigurationError(
            minBytes <= 1
                ? "app '\(app)': \(key) is empty" : "app '\(app)': \(what) in \(key) must be at least \(minBytes) bytes"
        )
    }
    return secret
}

/// A secret given either inline (`key`) or as a file (`key_file`): exactly one of the two, as an
/// app's configuration states it. Returns the material trimmed of surrounding whitespace and
/// newlines, with the same length rule and messages as ``readSecretFile(_:app:key:minBytes:what:)``.
func secretMaterial(
    inline: String?,
    file: String?,
    app: String,
    key: String,
    fileKey: String,
    minBytes: Int,
    what: String = "the secret"
) throws -> String {
    switch (inline, file) {
    case (nil, nil):
        throw ConfigurationError("app '\(app)': set one of \(key) or \(fileKey)")
    case (.some, .some):
        throw ConfigurationError("app '\(app)': set only one of \(key) or \(fileKey)")
    case (nil, let path?):
        return try readSecretFile(path, app: app, key: fileKey, minBytes: minBytes, what: what)
    case (let value?, nil):
        let secret = value.trimmingCharacters(in: .whitespacesAndNewlines)
        guard secret.utf8.count >= minBytes else {
            throw ConfigurationError(
                minBytes <= 1
                    ? "app '\(app)': \(key) is empty"
                    : "app '\(app)': \(what) in \(key) must be at least \(minBytes) bytes"
            )
        }
        return secret
    }
}

/// How a secret is shown: where it is configured and a short fingerprint an operator can match
/// against their own copy (`printf %s "$secret" | sha256sum | cut -c1-8`), never any part of it.
public struct SecretIdentifier: Codable, Sendable, Hashable {
    /// The configuration key that holds it: `webhook_secrets[0]`, `apns.token.key`, `zendesk.api_token_file` …
    public var label: String
    /// `sha256:` and the first 8 hex digits of the secret's SHA-256.
    public var fingerprint: String

    public init(label: String, secret: String) {
        self.label = label
        self.fingerprint = Self.fingerprint(secret)
    }

    /// `sha256:` and the first 8 hex digits of SHA-256 over the secret's UTF-8 bytes. 32 bits
    /// identify a secret among an operator's few without helping anyone guess it.
    public static func fingerprint(_ secret: String) -> String {
        fingerprint(Data(secret.utf8))
    }

    /// The fingerprint of raw bytes (an encryption key).
    static func fingerprint(_ bytes: Data) -> String {
        "sha256:" + SHA256.hash(data: bytes).prefix(4).map { String(format: "%02x", $0) }.joined()
    }
}
