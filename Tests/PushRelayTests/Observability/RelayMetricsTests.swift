import TestSupport
import Testing

@testable import PushRelay

/// What `GET /metrics` says of each metric (``RelayMetrics``).
@Suite("Metrics: names and help texts")
struct RelayMetricsTests {
    @Test("every metric the relay serves has a # HELP line with its text, once, before its # TYPE line")
    func everyFamilyHasHelp() throws {
        let metrics = RelayMetrics()
        metrics.webhooksAccepted(app: "a", deliveries: 2)
        metrics.delivery(app: "a", platform: "ios", outcome: .delivered)
        metrics.deliveredAfter(app: "a", .milliseconds(12))
        metrics.zendeskForwarded(app: "a", tokens: 3)
        metrics.zendeskFailure(app: "a", reason: "transport")
        metrics.bulkUnregister(app: "a", removed: 4, notFound: 1)
        metrics.eventsSent(app: "a", count: 5)
        metrics.eventFailure(app: "a", reason: "HTTP 500")
        metrics.eventsQueued(app: "a", count: 6)
        metrics.pruned(table: "deliveries", rows: 7)
        metrics.droppedPartitions(table: "deliveries", count: 1)
        metrics.historyPartitionDaysAhead(14)
        metrics.unreadPoll(app: "a", answer: "read")
        metrics.unreadStreamRefused(app: "a")
        metrics.connectionRefused()
        // A second app and a second call of the same metric: the same family, no second HELP.
        metrics.webhooksAccepted(app: "b", deliveries: 1)
        metrics.unreadPoll(app: "a", answer: "cached_routed")

        let lines = metrics.text.split(separator: "\n").map(String.init)
        let typed = lines.filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
        #expect(Set(typed) == Set(RelayMetrics.Metric.allCases.map { Substring($0.rawValue) }), "every metric served")
        for metric in RelayMetrics.Metric.allCases {
            let help = lines.filter { $0.hasPrefix("# HELP \(metric.rawValue) ") }
            #expect(help == ["# HELP \(metric.rawValue) \(metric.help)"], "\(metric.rawValue)")
            let helpIndex = try #require(lines.firstIndex { $0.hasPrefix("# HELP \(metric.rawValue) ") })
            #expect(lines[helpIndex + 1].hasPrefix("# TYPE \(metric.rawValue) "))
        }
        #expect(metricValue(metrics.text, "push_relay_webhooks_accepted_total", ["app": "b"]) == 1)
        #expect(metricValue(metrics.text, "push_relay_unread_polls_total", ["app": "a", "answer": "read"]) == 1)
    }
}
