import Foundation
import Hummingbird
import NIOCore

/// The request context of PushRelay's router.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The connection the request came on; the console passes it to the API requests it makes on
    /// the visitor's behalf.
    public let channel: any Channel

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.channel = source.channel
    }

    /// Webhook bodies are capped well below Hummingbird's default; larger bodies get 413.
    public var maxUploadSize: Int { Self.uploadLimit }

    /// ``maxUploadSize``, for code that has no request context (``WebhookShortcut``).
    static let uploadLimit = 1024 * 1024

    /// Stable key order and ISO 8601 dates in every JSON response.
    public var responseEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }
}
