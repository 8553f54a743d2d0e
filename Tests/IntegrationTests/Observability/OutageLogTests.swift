import Configuration
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Postgres
import Synchronization
import TestSupport
import Testing

@testable import PushRelay

/// An outage is two lines in the log whatever the load, one when it begins and one when it ends,
/// so an operator sees it and its length at once (docs/runbooks.md, "The database is
/// unavailable").
@Suite("Logs: a database outage")
struct OutageLogTests {
    /// Each write is one line as the handler wrote it.
    final class Lines: TextOutputStream, Sendable {
        let lines = Mutex<[String]>([])
        func write(_ string: String) { lines.withLock { $0.append(string) } }
    }

    /// A line's level, message and metadata, from either format.
    struct Line {
        var level: String
        var message: String
        var metadata: [String: String]

        init?(_ line: String, format: RelayLogHandler.Format) {
            switch format {
            case .json:
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
                level = object["level"] as? String ?? ""
                message = object["message"] as? String ?? ""
                metadata = object.compactMapValues { $0 as? String }
            case .text:
                // `timestamp level label: key=value … [source] message`; the test's values hold no "] ".
                let fields = line.split(separator: " ", maxSplits: 2)
                guard fields.count == 3, let source = line.range(of: "] ") else { return nil }
                level = String(fields[1])
                message = String(line[source.upperBound...].dropLast())
                let pairs = line[..<source.lowerBound].split(separator: ":", maxSplits: 1).last ?? ""
                metadata = [:]
                var key: Substring?
                for word in pairs.split(separator: " ") {
                    if let equals = word.firstIndex(of: "="), !word[..<equals].isEmpty,
                        word[..<equals].allSatisfy({ $0.isLowercase || $0 == "." || $0 == "_" })
                    {
                        key = word[..<equals]
                        metadata[String(word[..<equals])] = String(word[word.index(after: equals)...])
                    } else if let key, !word.hasPrefix("[") {
                        metadata[String(key), default: ""] += " " + word
                    }
                }
            }
        }
    }

    @Test(
        "a database that stops answering for 5 s under load: one 'database unavailable' warning, one 'database available again' notice with the outage's length, nothing else above info, no line split",
        arguments: [RelayLogHandler.Format.text, .json]
    )
    func outageIsTwoLines(format: RelayLogHandler.Format) async throws {
        let direct = try await TestDatabase.makeDatabase()
        let port = try #require(direct.split(separator: " ").last(where: { $0.hasPrefix("port=") }).flatMap { Int($0.dropFirst(5)) })
        let proxy = try FreezableProxy(targetPort: port)
        defer { proxy.stop() }
        let lines = Lines()
        var logger = Logger(label: "push-relay") { RelayLogHandler(label: $0, stream: lines, format: format) }
        logger.logLevel = .info
        let test = try await TestApp.make(conninfo: direct + " port=\(proxy.port)")
        let app = try await test.application(
            extra: [
                "database.statement_timeout_ms": .init(.int(1000), isSecret: false),
                "database.acquire_timeout_seconds": .init(.int(2), isSecret: false),
                "database.connect_timeout_seconds": .init(.int(2), isSecret: false),
                "database.listener_probe_seconds": .init(.int(1), isSecret: false),
                // The dispatcher polls the outbox too, and fails with it.
                "delivery.enabled": .init(.bool(true), isSecret: false),
                "delivery.poll_interval_ms": .init(.int(200), isSecret: false),
            ],
            logger: logger
        )
        let clock = ContinuousClock()
        // From the freeze until the load stopped: the outage the log reports lies within it.
        let (observed, answered) = try await app.testLive { client -> (Duration, Int) in
            let port = try #require(client.port)
            final class Load: Sendable {
                let stop = Atomic<Bool>(false)
                let thawed = Atomic<Bool>(false)
                let acceptedAfterThaw = Atomic<Bool>(false)
                let answered = Atomic<Int>(0)
            }
            let load = Load()
            return try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<3 {
                    group.addTask {
                        var index = 0
                        while !load.stop.load(ordering: .relaxed) {
                            index += 1
                            let body = webhook(devices: [(apnsToken(), "ios")], ticket: "w\(worker)-\(index)")
                            let request = RawHTTP.request(
                                "POST",
                                DatabaseFaultTests.url,
                                headers: [("Content-Type", "application/json")],
                                body: Array(body.utf8)
                            )
                            let status = try await RawHTTP.send(port: port, request)?.status
                            if status != nil { load.answered.add(1, ordering: .relaxed) }
                            if status == 202, load.thawed.load(ordering: .relaxed) { load.acceptedAfterThaw.store(true, ordering: .relaxed) }
                            try await Task.sleep(for: .milliseconds(status == 202 ? 20 : 100))
                        }
                    }
                }
                try await Task.sleep(for: .seconds(1))
                let frozen = clock.now
                proxy.freeze()
                try await Task.sleep(for: .seconds(5))
                proxy.thaw()
                load.thawed.store(true, ordering: .relaxed)
                let accepted = await eventually { load.acceptedAfterThaw.load(ordering: .relaxed) }
                #expect(accepted, "no webhook accepted after the thaw")
                try await Task.sleep(for: .seconds(2))
                load.stop.store(true, ordering: .relaxed)
                try await group.waitForAll()
                return (clock.now - frozen, load.answered.load(ordering: .relaxed))
            }
        }

        let written = lines.lines.withLock { $0 }
        // One write per event, ending in its only newline.
        for line in written {
            #expect(line.last == "\n" && !line.dropLast().contains(where: \.isNewline), "a line was split: \(line.debugDescription)")
        }
        let parsed = written.compactMap { Line($0, format: format) }
        #expect(parsed.count == written.count, "lines that do not parse: \(written.filter { Line($0, format: format) == nil })")
        // Every answered request was logged, however many a loaded machine served (one at least:
        // the webhook accepted after the thaw).
        #expect(answered > 0)
        #expect(parsed.filter { $0.message == "request" }.count >= answered, "\(answered) requests were answered")

        let unavailable = parsed.filter { $0.message == "database unavailable" }
        let availableAgain = parsed.filter { $0.message == "database available again" }
        #expect(unavailable.count == 1, "\(unavailable.map(\.metadata))")
        #expect(unavailable.first?.level == "warning")
        #expect(unavailable.first?.metadata["db.cause"]?.isEmpty == false)
        #expect(availableAgain.count == 1, "\(availableAgain.map(\.metadata))")
        #expect(availableAgain.first?.level == "notice")
        let outage = try #require(availableAgain.first?.metadata["db.outage_ms"].flatMap { Int($0) })
        // Measured from the first failure (a statement timeout and its grace into the freeze, on an
        // idle machine) to the first success after the thaw: within what the test observed.
        let observedMilliseconds = observed.components.seconds * 1000 + observed.components.attoseconds / 1_000_000_000_000_000
        #expect(outage > 0 && outage <= observedMilliseconds, "the outage lasted \(outage) ms by the log, \(observed) from freeze to end")
        // Nothing else above info: what failed meanwhile is said at debug, if at all.
        let loud = parsed.filter { ["warning", "error", "critical"].contains($0.level) && $0.message != "database unavailable" }
        #expect(loud.isEmpty, "\(loud.map { "\($0.level) \($0.message) \($0.metadata)" })")
        let order = written.firstIndex { $0.contains("database unavailable") }.flatMap { first in
            written.firstIndex { $0.contains("database available again") }.map { first < $0 }
        }
        #expect(order == true)
    }
}
