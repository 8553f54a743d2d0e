import Foundation
import Logging
import Synchronization
import Testing

@testable import PushRelay

/// Collects written lines, for comparing two handlers' output.
private final class Lines: TextOutputStream, Sendable {
    let lines = Mutex<[String]>([])
    func write(_ string: String) { lines.withLock { $0.append(string) } }
    /// The lines without their leading timestamp (which may differ by a second between handlers).
    var withoutTimestamps: [String] {
        lines.withLock { $0.map { String($0.drop { $0 != " " }) } }
    }
    var all: [String] { lines.withLock { $0 } }
}

/// Counts how often its description is rendered.
private final class Rendered: CustomStringConvertible, Sendable {
    let count = Atomic<Int>(0)
    var description: String {
        count.add(1, ordering: .relaxed)
        return "rendered"
    }
}

@Suite("Relay log handler")
struct RelayLogHandlerTests {
    /// As libpq words a refused connection.
    static let libpqMessage = """
        connection to server at "127.0.0.1", port 5432 failed: Connection refused
        \tIs the server running on that host and accepting TCP/IP connections?

        """

    @Test(
        "writes the same lines as StreamLogHandler but for the timestamp: handler metadata, a line's own metadata winning, errors, levels",
        arguments: [false, true]
    )
    func sameLinesAsStreamLogHandler(withProvider: Bool) {
        let expected = Lines()
        let actual = Lines()
        // A provider's values win over the handler's and lose to the line's own.
        let provider = withProvider ? Logger.MetadataProvider { ["provided": "p", "push.app": "from-provider"] } : nil
        var reference = Logger(label: "push-relay.test") { StreamLogHandler(label: $0, stream: expected, metadataProvider: provider) }
        var relay = Logger(label: "push-relay.test") { RelayLogHandler(label: $0, stream: actual, metadataProvider: provider) }
        func both(_ body: (inout Logger) -> Void) {
            body(&reference)
            body(&relay)
        }
        struct Failure: Error {}
        both { $0.logLevel = .info }
        both { $0.info("no metadata yet") }
        both { $0[metadataKey: "request.id"] = "abc" }
        both { $0[metadataKey: "push.app"] = "support" }
        both { $0.info("with handler metadata") }
        both { $0.warning("line metadata wins", metadata: ["push.app": "other", "push.device": "1234…abcd"]) }
        both { $0.debug("below the level: not written") }
        both { $0[metadataKey: "request.id"] = nil }
        both { $0.error("after a key was removed", error: Failure()) }
        #expect(actual.lines.withLock { $0.count } == 4)
        #expect(actual.withoutTimestamps == expected.withoutTimestamps)
        #expect(actual.withoutTimestamps[2].contains("push.app=other push.device=1234…abcd"))
        #expect(
            actual.withoutTimestamps[1].contains(
                withProvider ? "provided=p push.app=from-provider request.id=abc" : "push.app=support request.id=abc"
            )
        )
    }

    @Test("timestamps are RFC 3339 in UTC with milliseconds, in both formats", arguments: RelayLogHandler.Format.allCases)
    func millisecondTimestamps(format: RelayLogHandler.Format) throws {
        let lines = Lines()
        // 2026-11-28 05:04:03.9996 UTC: truncated, not rounded, to the millisecond.
        let logger = Logger(label: "push-relay") {
            var handler = RelayLogHandler(label: $0, stream: lines, format: format)
            handler.now = { 1_795_842_243.9996 }
            return handler
        }
        logger.info("one")
        let line = try #require(lines.all.first)
        let stamp: String
        switch format {
        case .text: stamp = String(line.prefix { $0 != " " })
        case .json: stamp = try #require(try Self.object(line)["timestamp"] as? String)
        }
        #expect(stamp == "2026-11-28T05:04:03.999Z")
    }

    @Test("a libpq-like message, and values with newlines or other control characters, stay one line", arguments: RelayLogHandler.Format.allCases)
    func newlinesAreEscaped(format: RelayLogHandler.Format) throws {
        let lines = Lines()
        var logger = Logger(label: "push-relay") { RelayLogHandler(label: $0, stream: lines, format: format) }
        logger[metadataKey: "request.id"] = "a\rb"
        logger.warning(
            "database unavailable: \(Self.libpqMessage)",
            metadata: ["db.cause": "\(Self.libpqMessage)", "push.reason": "bell\u{7}del\u{7F}nel\u{85}ls\u{2028}ps\u{2029}esc\u{1B}"]
        )
        let line = try #require(lines.all.first)
        #expect(lines.all.count == 1)
        #expect(line.last == "\n")
        #expect(
            !line.dropLast().unicodeScalars.contains {
                $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0.value == 0x2028 || $0.value == 0x2029
            }
        )
        switch format {
        case .text:
            #expect(line.contains(#"port 5432 failed: Connection refused\n\tIs the server running"#))
            #expect(line.contains(#"request.id=a\rb"#))
            #expect(line.contains(#"push.reason=bell\u{07}del\u{7F}nel\u{0085}ls\u{2028}ps\u{2029}esc\u{1B}"#), "\(line)")
        case .json:
            // Parses back to exactly what was logged.
            let object = try Self.object(line)
            #expect(object["message"] as? String == "database unavailable: \(Self.libpqMessage)")
            #expect(object["db.cause"] as? String == Self.libpqMessage)
            #expect(object["request.id"] as? String == "a\rb")
            #expect(object["push.reason"] as? String == "bell\u{7}del\u{7F}nel\u{85}ls\u{2028}ps\u{2029}esc\u{1B}")
        }
    }

    @Test("JSON: one object per line with timestamp, level, label, source, message and the text format's metadata keys and values")
    func jsonHasTheTextKeys() throws {
        let text = Lines()
        let json = Lines()
        var textLogger = Logger(label: "push-relay") { RelayLogHandler(label: $0, stream: text) }
        var jsonLogger = Logger(label: "push-relay") { RelayLogHandler(label: $0, stream: json, format: .json) }
        struct Failure: Error {}
        for index in [0, 1] {
            var logger = index == 0 ? textLogger : jsonLogger
            logger.logLevel = .debug
            logger[metadataKey: "request.id"] = "abc"
            logger.info("request", metadata: ["http.method": "POST", "http.status": "202", "quote": #"say "hi" \ back"#])
            logger.debug("nested", metadata: ["list": ["a", "b"], "map": ["k": "v"], "message": "collides"])
            logger.error("failed", error: Failure())
            if index == 0 { textLogger = logger } else { jsonLogger = logger }
        }
        #expect(json.all.count == 3)
        for (textLine, jsonLine) in zip(text.all, json.all) {
            #expect(jsonLine.filter { $0 == "\n" }.count == 1 && jsonLine.last == "\n")
            let object = try Self.object(jsonLine)
            // `timestamp level label: k=v … [source] message`
            let fields = textLine.split(separator: " ", maxSplits: 2)
            #expect(object["timestamp"] is String)
            #expect(object["level"] as? String == String(fields[1]))
            #expect(object["label"] as? String == "push-relay")
            #expect(object["source"] as? String == "PushRelayTests")
            #expect(textLine.hasSuffix("[PushRelayTests] \(object["message"] as? String ?? "?")\n"))
            let metadataKeys = Set(object.keys).subtracting(["timestamp", "level", "label", "source", "message"])
            let textKeys = Set(
                textLine.split(separator: " ").compactMap { word -> String? in
                    guard let equals = word.firstIndex(of: "="), word[..<equals].allSatisfy({ $0.isLetter || $0 == "." }) else { return nil }
                    return String(word[..<equals])
                }
            )
            // The one key named like a fixed key is `metadata.message` in JSON.
            #expect(metadataKeys == Set(textKeys.map { $0 == "message" ? "metadata.message" : $0 }), "\(textLine)")
        }
        let request = try Self.object(json.all[0])
        #expect(request["http.method"] as? String == "POST")
        #expect(request["request.id"] as? String == "abc")
        #expect(request["quote"] as? String == #"say "hi" \ back"#)
        let nested = try Self.object(json.all[1])
        #expect(nested["list"] as? [String] == ["a", "b"])
        #expect(nested["map"] as? [String: String] == ["k": "v"])
        #expect(nested["message"] as? String == "nested")
        #expect(nested["metadata.message"] as? String == "collides")
        let failed = try Self.object(json.all[2])
        #expect((failed["error.type"] as? String)?.hasSuffix("Failure") == true)
    }

    @Test("metadata set on the handler is rendered only for lines that are written", arguments: RelayLogHandler.Format.allCases)
    func metadataRenderedOnlyWhenWritten(format: RelayLogHandler.Format) {
        let lines = Lines()
        let rendered = Rendered()
        var logger = Logger(label: "push-relay") { RelayLogHandler(label: $0, stream: lines, format: format) }
        logger.logLevel = .info
        logger[metadataKey: "lazy"] = .stringConvertible(rendered)
        for index in 0..<100 { logger[metadataKey: "request.id"] = "\(index)" }
        logger.debug("not written")
        #expect(rendered.count.load(ordering: .relaxed) == 0)
        logger.info("written")
        #expect(rendered.count.load(ordering: .relaxed) == 1)
        #expect(lines.all.count == 1)
    }

    static func object(_ line: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }
}

@Suite("Journal priorities")
struct JournalPriorityTests {
    @Test("to the journal, each line starts with its syslog priority, in both formats; elsewhere lines are as they were")
    func priorityPrefix() {
        for format in RelayLogHandler.Format.allCases {
            let journal = Lines()
            let plain = Lines()
            var toJournal = Logger(label: "push-relay") { RelayLogHandler(label: $0, stream: journal, format: format, journal: true) }
            var elsewhere = Logger(label: "push-relay") { RelayLogHandler(label: $0, stream: plain, format: format) }
            toJournal.logLevel = .trace
            elsewhere.logLevel = .trace
            for level in Logger.Level.allCases {
                toJournal.log(level: level, "a line")
                elsewhere.log(level: level, "a line")
            }
            let priorities = journal.all.map { String($0.prefix(3)) }
            #expect(priorities == ["<7>", "<7>", "<6>", "<5>", "<4>", "<3>", "<2>"], "\(format)")
            #expect(plain.all.allSatisfy { !$0.hasPrefix("<") }, "\(format)")
            // Past the prefix, the same line.
            #expect(
                journal.all.map { String($0.dropFirst(3).drop { $0 != " " && $0 != "," }) }
                    == plain.all.map { String($0.drop { $0 != " " && $0 != "," }) }
            )
        }
    }

    @Test("standard error is the journal only when JOURNAL_STREAM names its device and inode")
    func journalStream() throws {
        var pipeEnds: [Int32] = [0, 0]
        #expect(pipe(&pipeEnds) == 0)
        defer { _ = pipeEnds.map { close($0) } }
        var status = stat()
        #expect(fstat(pipeEnds[1], &status) == 0)
        let named = "\(status.st_dev):\(status.st_ino)"
        #expect(JournalPriority.isJournal(descriptor: pipeEnds[1], journalStream: named))
        // Inherited by a process whose output went elsewhere: another stream's numbers.
        #expect(!JournalPriority.isJournal(descriptor: pipeEnds[1], journalStream: "\(status.st_dev):\(status.st_ino + 1)"))
        #expect(!JournalPriority.isJournal(descriptor: pipeEnds[1], journalStream: nil))
        #expect(!JournalPriority.isJournal(descriptor: pipeEnds[1], journalStream: "garbage"))
        #expect(!JournalPriority.isJournal(descriptor: 999, journalStream: named), "a closed descriptor")
    }
}
