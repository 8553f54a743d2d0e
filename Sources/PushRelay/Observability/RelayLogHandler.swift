import Logging

/// swift-log's `StreamLogHandler` output (same line format, standard error), with metadata
/// rendered when a line is written instead of each time it is set.
///
/// `StreamLogHandler` re-renders all its metadata on every change, and the relay sets metadata on
/// every request (`request.id`) while most requests log nothing at the default levels. Here the
/// handler's metadata is handed to the stream handler as the event's metadata, so it is only
/// sorted and printed for lines that are written.
public struct RelayLogHandler: LogHandler {
    /// Writes the lines; it has no metadata and no provider of its own, so everything it prints
    /// comes from the event's metadata, merged here.
    private var stream: StreamLogHandler
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    /// Writes to standard error, as `StreamLogHandler.standardError` does.
    public static func standardError(label: String) -> RelayLogHandler {
        RelayLogHandler(stream: StreamLogHandler.standardError(label: label, metadataProvider: nil), provider: LoggingSystem.metadataProvider)
    }

    /// Writes to `stream`.
    public init(label: String, stream: any TextOutputStream & Sendable, metadataProvider: Logger.MetadataProvider? = nil) {
        self.init(stream: StreamLogHandler(label: label, stream: stream, metadataProvider: nil), provider: metadataProvider)
    }

    private init(stream: StreamLogHandler, provider: Logger.MetadataProvider?) {
        self.stream = stream
        metadataProvider = provider
    }

    public var logLevel: Logger.Level {
        get { stream.logLevel }
        set { stream.logLevel = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// The handler's metadata, then the provider's, then the line's own, each winning over the
    /// one before, as in `StreamLogHandler`.
    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get(), !provided.isEmpty {
            merged.merge(provided) { _, provided in provided }
        }
        if let explicit = event.metadata, !explicit.isEmpty {
            merged.merge(explicit) { _, explicit in explicit }
        }
        var event = event
        event.metadata = merged.isEmpty ? nil : merged
        stream.log(event: event)
    }
}
