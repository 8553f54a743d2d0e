import Crypto
import Foundation

/// Forms of values that are safe to log.
enum Redaction {
    /// A device token (or another long opaque identifier) as it may be logged: the first 6 and
    /// last 4 characters.
    static func token(_ token: String) -> String {
        guard token.count > 12 else { return "…" }
        return "\(token.prefix(6))…\(token.suffix(4))"
    }
}

/// How a secret is shown to an operator: `sha256:` and the first 8 hex digits of its SHA-256,
/// which `printf %s "$SECRET" | sha256sum | cut -c1-8` reproduces. It tells which secret is loaded
/// without revealing any of it (a prefix would give away part of the secret).
public enum Fingerprint {
    public static func of(_ secret: String) -> String {
        "sha256:" + SHA256.hash(data: Data(secret.utf8)).prefix(4).map { String(format: "%02x", $0) }.joined()
    }
}
