import Logging
import PushRelay
import Synchronization
import Testing

/// Collects written lines, for comparing two handlers' output.
private final class Lines: TextOutputStream, Sendable {
    let lines = Mutex<[String]>([])
    func write(_ string: String) { lines.withLock { $0.append(string) } }
    /// The lines without their leading timestamp (which may differ by a second between handlers).
    var withoutTimestamps: [String] {
        lines.withLock { $0.map { String($0.drop { $0 != " " }) } }
    }
}

@Suite("Relay log handler")
struct RelayLogHandlerTests {
    @Test(
        "writes the same lines as StreamLogHandler: handler metadata, a line's own metadata winning, errors, levels",
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
}
