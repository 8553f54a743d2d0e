import Foundation
import Postgres
import ServiceLifecycle
import TestSupport
import Testing

@Suite("COPY FROM STDIN and LISTEN/NOTIFY")
struct PostgresCopyAndNotifyTests {
    @Test("COPY streams 100,000 rows, escaping tabs, newlines, backslashes and NULLs")
    func copyManyRows() async throws {
        let conninfo = try await TestDatabase.makeDatabase()
        let client = PostgresClient(configuration: .test(conninfo: conninfo), logger: TestDatabase.logger)
        try await client.query("CREATE TABLE tokens (n int, token text, note text)")
        let count = try await client.withConnection { session in
            try await session.copyIn("COPY tokens (n, token, note) FROM STDIN") { writer in
                for n in 0..<100_000 {
                    let note: String? = n % 10 == 0 ? nil : "a\tb\nc\\d ✓"
                    try await writer.write([n, "token-\(n)", note])
                }
            }
        }
        #expect(count == 100_000)
        let row = try await client.query(
            "SELECT count(*), sum(n), count(note), count(DISTINCT token), min(note) FROM tokens"
        ).first!
        let (rows, sum, notes, distinct, note) = try row.decode((Int, Int64, Int, Int, String).self)
        #expect(rows == 100_000)
        #expect(sum == Int64(99_999 * 100_000 / 2))
        #expect(notes == 90_000)
        #expect(distinct == 100_000)
        #expect(note == "a\tb\nc\\d ✓")
        await client.close()
    }

    @Test("a COPY whose producer throws writes nothing")
    func copyAborted() async throws {
        let conninfo = try await TestDatabase.makeDatabase()
        let client = PostgresClient(configuration: .test(conninfo: conninfo), logger: TestDatabase.logger)
        try await client.query("CREATE TABLE tokens (token text)")
        struct ProducerFailed: Error {}
        await #expect(throws: ProducerFailed.self) {
            try await client.withConnection { session in
                try await session.copyIn("COPY tokens (token) FROM STDIN") { writer in
                    for n in 0..<1000 { try await writer.write(["t\(n)"]) }
                    try await writer.flush()
                    throw ProducerFailed()
                }
            }
        }
        #expect(try await client.query("SELECT count(*) FROM tokens").first?.decode(Int.self, at: 0) == 0)
        await client.close()
    }

    @Test("NOTIFY reaches a running listener with its payload, and each stream only its channels")
    func listenNotify() async throws {
        let conninfo = try await TestDatabase.makeDatabase()
        let client = PostgresClient(configuration: .test(conninfo: conninfo), logger: TestDatabase.logger)
        let listener = try PostgresListener(conninfo: conninfo, channels: ["deliveries_due", "other"], logger: TestDatabase.logger)
        let events = listener.events()
        // A second consumer of the same connection, for one of its channels.
        let onlyOther = listener.events(on: ["other"])
        let received = try await withThrowingTaskGroup(of: [PostgresNotification]?.self) { group in
            group.addTask {
                try await listener.run()
                return nil
            }
            group.addTask {
                var notifications: [PostgresNotification] = []
                for await event in events {
                    switch event {
                    case .listening:
                        try await client.notify(channel: "deliveries_due", payload: "app-1")
                        try await client.notify(channel: "unrelated", payload: "ignored")
                        try await client.notify(channel: "other", payload: "")
                    case .lost:
                        break
                    case .notification(let notification):
                        notifications.append(notification)
                        if notifications.count == 2 { return notifications }
                    }
                }
                return notifications
            }
            group.addTask {
                try await Task.sleep(for: hangCeiling)  // only a hang ends here
                return []
            }
            let first = try await group.next()!
            group.cancelAll()
            return first ?? []
        }
        #expect(received.map(\.channel) == ["deliveries_due", "other"])
        #expect(received.map(\.payload) == ["app-1", ""])
        // The listener has stopped (the group waited for it), so the stream has ended.
        var otherEvents: [PostgresListenerEvent] = []
        for await event in onlyOther { otherEvents.append(event) }
        #expect(otherEvents.first == .listening)
        #expect(
            otherEvents.compactMap { event -> String? in
                guard case .notification(let notification) = event else { return nil }
                return notification.channel
            } == ["other"]
        )
        await client.close()
    }

    @Test("listener channel names are restricted to safe identifiers")
    func channelValidation() {
        #expect(throws: PostgresError.self) {
            _ = try PostgresListener(conninfo: "", channels: ["bad; DROP TABLE x"], logger: TestDatabase.logger)
        }
    }
}
