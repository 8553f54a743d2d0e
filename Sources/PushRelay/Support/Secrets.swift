import Configuration
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
func readSecretFile(_ path: String, app: String, key: String, minBytes: Int, what: String = "the secret") throws -> String {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw ConfigurationError("app '\(app)': cannot read \(key) \(path)")
    }
    let secret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    guard secret.utf8.count >= minBytes else {
        throw ConfigurationError(
            minBytes <= 1 ? "app '\(app)': \(key) is empty" : "app '\(app)': \(what) in \(key) must be at least \(minBytes) bytes"
        )
    }
    return secret
}
