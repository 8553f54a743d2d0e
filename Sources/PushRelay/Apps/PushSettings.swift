import Foundation

/// `apps[].push`: what an app's alert pushes carry and how the device presents them.
///
/// ```yaml
/// push:
///   content: generic            # full (default) | generic | encrypted
///   thread_id: true             # APNs thread-id (and FCM data thread_id) = the ticket
///   category: ZENDESK_REPLY     # APNs aps.category, optional
///   sound: default              # "" for none
///   title_loc_key: PUSH_RELAY_REPLY_TITLE
///   loc_key: PUSH_RELAY_REPLY_BODY
///   fallback_title: New reply
///   fallback_body: You have a new reply to your request.
/// ```
///
/// The mode is read when a push is sent, so a reload or an admin API change applies to pushes
/// already queued. What the relay stores is decided when a webhook is accepted: a `generic` app's
/// reply text is never stored; an `encrypted` app's is kept until its deliveries ended.
public struct PushSettings: Sendable, Codable, Hashable {
    /// Whether the reply's text reaches Apple and Google.
    public enum Content: String, Sendable, Codable, Hashable, CaseIterable {
        /// Title and body in clear, as the webhook gave them.
        case full
        /// No reply text: localisation keys and the fallback text.
        case generic
        /// Title and body encrypted for devices registered with a `push_key`; the generic push for
        /// the others.
        case encrypted
    }

    public var content: Content?
    public var threadID: Bool?
    public var category: String?
    public var sound: String?
    public var titleLocKey: String?
    public var locKey: String?
    public var fallbackTitle: String?
    public var fallbackBody: String?

    public static let defaultTitleLocKey = "PUSH_RELAY_REPLY_TITLE"
    public static let defaultLocKey = "PUSH_RELAY_REPLY_BODY"
    public static let defaultFallbackTitle = "New reply"
    public static let defaultFallbackBody = "You have a new reply to your request."

    public init(content: Content? = nil, threadID: Bool? = nil, category: String? = nil, sound: String? = nil) {
        self.content = content
        self.threadID = threadID
        self.category = category
        self.sound = sound
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case content, category, sound
        case threadID = "thread_id"
        case titleLocKey = "title_loc_key"
        case locKey = "loc_key"
        case fallbackTitle = "fallback_title"
        case fallbackBody = "fallback_body"
    }

    /// The keys of the section, for the configuration file's key check.
    static let knownKeys = CodingKeys.allCases.map { "push.\($0.rawValue)" }

    /// Refuses values no device could show: texts longer than 256 bytes, control characters.
    func validate(app: String) throws {
        let texts: [(String, String?)] = [
            ("category", category), ("sound", sound), ("title_loc_key", titleLocKey), ("loc_key", locKey),
            ("fallback_title", fallbackTitle), ("fallback_body", fallbackBody),
        ]
        for case let (key, value?) in texts
        where value.utf8.count > 256 || value.unicodeScalars.contains(where: { $0.value < 0x20 }) {
            throw ConfigurationError("app '\(app)': push.\(key) must be at most 256 bytes without control characters")
        }
        for case let (key, value?) in [("fallback_title", fallbackTitle), ("fallback_body", fallbackBody)]
        where value.isEmpty {
            throw ConfigurationError(
                "app '\(app)': push.\(key) must not be empty (it is what a device shows instead of the reply)"
            )
        }
    }
}
