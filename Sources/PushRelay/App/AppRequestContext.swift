import Foundation
import Hummingbird

/// The request context of PushRelay's router.
public struct AppRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
    }

    /// Webhook bodies are capped well below Hummingbird's default; larger bodies get 413.
    public var maxUploadSize: Int { 1024 * 1024 }

    /// Stable key order and ISO 8601 dates in every JSON response.
    public var responseEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }
}
