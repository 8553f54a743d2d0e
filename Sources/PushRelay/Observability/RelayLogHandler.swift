import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// PushRelay's log lines: one per event, never split, as text or as JSON, stamped to the
/// millisecond in UTC (RFC 3339).
///
/// Text keeps swift-log's `StreamLogHandler` shape, `timestamp level label: metadata [source]
/// message`, with metadata sorted by key:
///
///     2026-11-27T05:40:01.123Z info push-relay: http.method=POST http.status=202 request.id=1f…  [PushRelay] request
///
/// JSON is one object per line with `timestamp`, `level`, `label`, `source` and `message`, then
/// each metadata key beside them under the same name as in the text (`"push.app":"support"`); a
/// metadata key that is one of those five is written as `metadata.<key>`. Nested metadata
/// (arrays, dictionaries) stays nested.
///
/// A newline or any other control character in a message, key or value (libpq's messages hold
/// `\n\t`) is escaped, as `\n` or `\u{1B}` in text and as JSON escapes in JSON, so no event ever
/// takes two lines or forges another. U+2028 and U+2029, which some viewers break lines at, are
/// escaped too.
///
/// `StreamLogHandler` re-renders all its metadata on every change, and the relay sets metadata on
/// every request (`request.id`) while most requests log nothing at the default levels. Here
/// metadata is only merged, sorted and printed for lines that are written.
/// Under systemd, when `JOURNAL_STREAM` says standard error is the journal, each line starts with
/// its syslog priority (`<3>` for an error, `<4>` a warning, `<6>` info; ``JournalPriority``):
/// journald takes the prefix off and files the line at that priority, so `journalctl -p warning`
/// shows errors and warnings, in both formats.
public struct RelayLogHandler: LogHandler {
    /// How lines are written: `log.format`.
    public enum Format: String, Sendable, CaseIterable {
        /// `timestamp level label: metadata [source] message`.
        case text
        /// One JSON object per line.
        case json
    }

    private let label: String
    private let format: Format
    private let stream: any TextOutputStream & Sendable
    /// Whether each line starts with its syslog priority (standard error is the journal).
    private let journal: Bool
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public var logLevel: Logger.Level = .info
    /// The wall-clock time of a line, in seconds since the epoch (tests give a fixed one).
    var now: @Sendable () -> Double = { Date().timeIntervalSince1970 }

    /// Writes to standard error, one `write(2)` per line.
    /// Lines start with their syslog priority when standard error is the journal.
    public static func standardError(label: String, format: Format = .text) -> RelayLogHandler {
        RelayLogHandler(
            label: label,
            stream: StandardError(),
            metadataProvider: LoggingSystem.metadataProvider,
            format: format,
            journal: JournalPriority.standardErrorIsJournal
        )
    }

    /// Writes each line, with its newline, to `stream` in one call; with `journal`, after its
    /// syslog priority (`<4>`).
    public init(
        label: String,
        stream: any TextOutputStream & Sendable,
        metadataProvider: Logger.MetadataProvider? = nil,
        format: Format = .text,
        journal: Bool = false
    ) {
        self.label = label
        self.stream = stream
        self.metadataProvider = metadataProvider
        self.format = format
        self.journal = journal
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// The handler's metadata, then the provider's, then the line's own, each winning over the
    /// one before, then the event's error as `error.message` and `error.type`, as in
    /// `StreamLogHandler`.
    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get(), !provided.isEmpty {
            merged.merge(provided) { _, provided in provided }
        }
        if let explicit = event.metadata, !explicit.isEmpty {
            merged.merge(explicit) { _, explicit in explicit }
        }
        if let error = event.error {
            merged["error.message"] = "\(error)"
            merged["error.type"] = "\(String(reflecting: type(of: error)))"
        }
        var line: String
        switch format {
        case .text: line = Self.textLine(time: Self.timestamp(now()), event: event, label: label, metadata: merged)
        case .json: line = Self.jsonLine(time: Self.timestamp(now()), event: event, label: label, metadata: merged)
        }
        if journal { line = JournalPriority.prefix(event.level) + line }
        var stream = self.stream
        stream.write(line)
    }

    // MARK: Text

    static func textLine(time: String, event: LogEvent, label: String, metadata: Logger.Metadata) -> String {
        var line = time
        line.reserveCapacity(160)
        line += " "
        line += event.level.rawValue
        if !label.isEmpty {
            line += " "
            appendText(label, to: &line)
        }
        line += ":"
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            line += " "
            appendText(key, to: &line)
            line += "="
            appendText(value.description, to: &line)
        }
        line += " ["
        appendText(event.source, to: &line)
        line += "] "
        appendText(event.message.description, to: &line)
        line += "\n"
        return line
    }

    private static func appendText(_ text: String, to line: inout String) {
        guard mayHoldLineBreak(text), text.unicodeScalars.contains(where: breaksLine) else {
            line += text
            return
        }
        for scalar in text.unicodeScalars {
            if breaksLine(scalar) {
                line += scalar.escaped(asASCII: true)
            } else {
                line.unicodeScalars.append(scalar)
            }
        }
    }

    // MARK: JSON

    /// The keys every JSON line has; a metadata key among them is written as `metadata.<key>`.
    public static let jsonKeys: Set<String> = ["timestamp", "level", "label", "source", "message"]

    static func jsonLine(time: String, event: LogEvent, label: String, metadata: Logger.Metadata) -> String {
        var line = #"{"timestamp":""#
        line.reserveCapacity(220)
        line += time
        line += #"","level":""#
        line += event.level.rawValue
        line += #"","label":"#
        appendJSON(label, to: &line)
        line += #","source":"#
        appendJSON(event.source, to: &line)
        line += #","message":"#
        appendJSON(event.message.description, to: &line)
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            line += ","
            appendJSON(jsonKeys.contains(key) ? "metadata." + key : key, to: &line)
            line += ":"
            appendJSON(value, to: &line)
        }
        line += "}\n"
        return line
    }

    private static func appendJSON(_ value: Logger.Metadata.Value, to line: inout String) {
        switch value {
        case .string(let string):
            appendJSON(string, to: &line)
        case .stringConvertible(let convertible):
            appendJSON(convertible.description, to: &line)
        case .array(let values):
            line += "["
            for (index, element) in values.enumerated() {
                if index > 0 { line += "," }
                appendJSON(element, to: &line)
            }
            line += "]"
        case .dictionary(let values):
            line += "{"
            for (index, (key, element)) in values.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { line += "," }
                appendJSON(key, to: &line)
                line += ":"
                appendJSON(element, to: &line)
            }
            line += "}"
        }
    }

    private static func appendJSON(_ text: String, to line: inout String) {
        line += "\""
        guard
            text.utf8.contains(where: {
                $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0x7F || $0 == 0xC2 || $0 == 0xE2
            })
        else {
            line += text
            line += "\""
            return
        }
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": line += #"\""#
            case "\\": line += #"\\"#
            case "\n": line += #"\n"#
            case "\r": line += #"\r"#
            case "\t": line += #"\t"#
            default:
                if breaksLine(scalar) {
                    line += #"\u"#
                    let hex = String(scalar.value, radix: 16)
                    line += String(repeating: "0", count: 4 - hex.utf8.count)
                    line += hex
                } else {
                    line.unicodeScalars.append(scalar)
                }
            }
        }
        line += "\""
    }

    // MARK: Both

    /// Whether `text` has a byte that starts a character ``breaksLine(_:)`` may flag: cheaper than
    /// looking at every scalar, and false for almost every line.
    private static func mayHoldLineBreak(_ text: String) -> Bool {
        text.utf8.contains { $0 < 0x20 || $0 == 0x7F || $0 == 0xC2 || $0 == 0xE2 }
    }

    /// C0 and C1 control characters, DEL, and the Unicode line and paragraph separators.
    static func breaksLine(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value <= 0x9F) || scalar.value == 0x2028
            || scalar.value == 0x2029
    }

    /// `now` (seconds since the epoch), as `2026-11-27T05:40:01.123Z`: truncated to the millisecond.
    static func timestamp(_ now: Double) -> String {
        let seconds = now.rounded(.down)
        return timestamp(seconds: Int(seconds), milliseconds: min(999, Int((now - seconds) * 1000)))
    }

    /// `seconds` since the epoch and `milliseconds`, as `2026-11-27T05:40:01.123Z`.
    static func timestamp(seconds: Int, milliseconds: Int) -> String {
        var time = seconds
        var parts = tm()
        gmtime_r(&time, &parts)
        return String(unsafeUninitializedCapacity: 24) { buffer in
            var index = 0
            func put(_ value: Int, digits: Int) {
                var divisor = 1
                for _ in 1..<digits { divisor *= 10 }
                var rest = value
                while divisor > 0 {
                    buffer[index] = UInt8(48 + rest / divisor)
                    rest %= divisor
                    divisor /= 10
                    index += 1
                }
            }
            func put(_ byte: UInt8) {
                buffer[index] = byte
                index += 1
            }
            put(Int(parts.tm_year) + 1900, digits: 4)
            put(UInt8(ascii: "-"))
            put(Int(parts.tm_mon) + 1, digits: 2)
            put(UInt8(ascii: "-"))
            put(Int(parts.tm_mday), digits: 2)
            put(UInt8(ascii: "T"))
            put(Int(parts.tm_hour), digits: 2)
            put(UInt8(ascii: ":"))
            put(Int(parts.tm_min), digits: 2)
            put(UInt8(ascii: ":"))
            put(Int(parts.tm_sec), digits: 2)
            put(UInt8(ascii: "."))
            put(milliseconds, digits: 3)
            put(UInt8(ascii: "Z"))
            return index
        }
    }
}

/// Standard error through `write(2)`, a whole line per call under a lock, so lines from several
/// threads never interleave.
private struct StandardError: TextOutputStream, Sendable {
    private static let lock = Mutex(())

    func write(_ string: String) {
        var string = string
        string.withUTF8 { bytes in
            Self.lock.withLock { _ in
                var offset = 0
                while offset < bytes.count {
                    let written = Glibc.write(2, bytes.baseAddress! + offset, bytes.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return
                    }
                    offset += written
                }
            }
        }
    }
}
