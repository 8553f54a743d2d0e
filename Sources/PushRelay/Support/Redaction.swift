/// Forms of values that are safe to log.
enum Redaction {
    /// A device token (or another long opaque identifier) as it may be logged: the first 6 and
    /// last 4 characters.
    static func token(_ token: String) -> String {
        guard token.count > 12 else { return "…" }
        return "\(token.prefix(6))…\(token.suffix(4))"
    }
}
