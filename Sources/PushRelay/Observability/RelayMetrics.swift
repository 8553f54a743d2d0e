import Hummingbird
import NIOCore
import Prometheus
import Synchronization

/// The relay's counters, served in Prometheus' text format at `GET /metrics`.
///
/// Each application owns its registry (no process-wide metrics bootstrap), so tests and embedded
/// uses can build several side by side. Labels are app ids, platforms and outcomes, never tokens.
public final class RelayMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()

    /// The counters every webhook and every delivery increments, kept once made: the registry's
    /// `makeCounter` checks the name and labels and looks them up under its lock on each call,
    /// which cost more than the increment itself.
    private struct OutcomeKey: Hashable {
        var app: String
        var platform: String
        var outcome: String
    }
    private let intakeCounters = Mutex<[String: (accepted: Counter, queued: Counter)]>([:])
    private let outcomeCounters = Mutex<[OutcomeKey: Counter]>([:])
    private let latencyHistograms = Mutex<[String: DurationHistogram]>([:])

    /// Buckets of ``deliveredAfter(app:_:)``: from the webhook's commit to the provider's answer.
    static let latencyBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250),
        .milliseconds(500), .seconds(1), .seconds(2), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
        .seconds(300), .seconds(3600),
    ]

    /// Per-minute counts for the console's Overview, written to PostgreSQL by ``ActivityWriter``.
    let activity = ActivityTally()

    public init() {}

    func webhooksAccepted(app: String, deliveries: Int) {
        activity.webhook(app: app)
        let counters =
            intakeCounters.withLock { $0[app] }
            ?? {
                let made = (
                    registry.makeCounter(descriptor: Metric.webhooksAccepted.descriptor, labels: [("app", app)]),
                    registry.makeCounter(descriptor: Metric.deliveriesQueued.descriptor, labels: [("app", app)])
                )
                intakeCounters.withLock { $0[app] = made }
                return made
            }()
        counters.accepted.increment()
        counters.queued.increment(by: Int64(deliveries))
    }

    /// One delivery's outcome: delivered, retry, failed, expired, skipped, dead_token, credential,
    /// lapsed (handed back after waiting past its lease), handed_back (at shutdown).
    func delivery(app: String, platform: String, outcome: DeliveryOutcome) {
        activity.outcome(app: app, outcome: outcome)
        let key = OutcomeKey(app: app, platform: platform, outcome: outcome.rawValue)
        if let counter = outcomeCounters.withLock({ $0[key] }) {
            counter.increment()
            return
        }
        let counter = registry.makeCounter(
            descriptor: Metric.pushOutcomes.descriptor,
            labels: [("app", app), ("platform", platform), ("outcome", outcome.rawValue)]
        )
        outcomeCounters.withLock { $0[key] = counter }
        counter.increment()
    }

    /// A push the provider accepted, `latency` after its delivery was stored (the webhook's commit,
    /// or the read that queued a badge sync): `push_relay_delivery_latency_seconds{app}`.
    func deliveredAfter(app: String, _ latency: Duration) {
        let histogram =
            latencyHistograms.withLock { $0[app] }
            ?? {
                let made = registry.makeDurationHistogram(
                    descriptor: Metric.deliveryLatency.descriptor,
                    labels: [("app", app)],
                    buckets: Self.latencyBuckets
                )
                latencyHistograms.withLock { $0[app] = made }
                return made
            }()
        histogram.record(latency)
    }

    func zendeskForwarded(app: String, tokens: Int) {
        registry.makeCounter(descriptor: Metric.zendeskForwardedTokens.descriptor, labels: [("app", app)]).increment(
            by: Int64(tokens)
        )
    }

    func zendeskFailure(app: String, reason: String) {
        registry.makeCounter(
            descriptor: Metric.zendeskForwardFailures.descriptor,
            labels: [("app", app), ("reason", reason)]
        ).increment()
    }

    func bulkUnregister(app: String, removed: Int, notFound: Int) {
        registry.makeCounter(descriptor: Metric.bulkUnregisterRemoved.descriptor, labels: [("app", app)]).increment(
            by: Int64(removed)
        )
        registry.makeCounter(descriptor: Metric.bulkUnregisterNotFound.descriptor, labels: [("app", app)]).increment(
            by: Int64(notFound)
        )
    }

    func eventsSent(app: String, count: Int) {
        registry.makeCounter(descriptor: Metric.eventsSent.descriptor, labels: [("app", app)]).increment(
            by: Int64(count)
        )
    }

    /// A failed request to an app's events endpoint: `HTTP <status>` or `transport`.
    func eventFailure(app: String, reason: String) {
        registry.makeCounter(
            descriptor: Metric.eventSendFailures.descriptor,
            labels: [("app", app), ("reason", reason)]
        ).increment()
    }

    /// Events of the app waiting to be sent (counted up to 100,000) when last looked at.
    func eventsQueued(app: String, count: Int) {
        registry.makeGauge(descriptor: Metric.eventsQueued.descriptor, labels: [("app", app)]).set(Int64(count))
    }

    /// Rows the retention service deleted, by table.
    func pruned(table: String, rows: Int) {
        registry.makeCounter(descriptor: Metric.retentionPrunedRows.descriptor, labels: [("table", table)]).increment(
            by: Int64(rows)
        )
    }

    /// Days from today to the end of the newest history partition (0 or less: none covers today,
    /// and new rows go to the newest partition); set by every instance at each retention interval.
    func historyPartitionDaysAhead(_ days: Int) {
        registry.makeGauge(descriptor: Metric.historyPartitionDaysAhead.descriptor).set(Int64(days))
    }

    /// History partitions retention dropped, by table.
    func droppedPartitions(table: String, count: Int) {
        registry.makeCounter(descriptor: Metric.retentionDroppedPartitions.descriptor, labels: [("table", table)])
            .increment(
                by: Int64(count)
            )
    }

    /// How a `GET …/unread` was answered: `cached` (304 from the cached ETag, on the connection's
    /// event loop: ``UnreadPollShortcut``), `cached_routed` (304 from the cached ETag through the
    /// router: API keys, `Connection: close`, …), `read` (the counts read from PostgreSQL).
    func unreadPoll(app: String, answer: String) {
        unreadPollCounter(app: app, answer: answer).increment()
    }

    func unreadStreamRefused(app: String) {
        registry.makeCounter(descriptor: Metric.unreadStreamsRefused.descriptor, labels: [("app", app)]).increment()
    }

    func connectionRefused() {
        registry.makeCounter(descriptor: Metric.connectionsRefused.descriptor).increment()
    }

    func unreadPollCounter(app: String, answer: String) -> Counter {
        registry.makeCounter(descriptor: Metric.unreadPolls.descriptor, labels: [("app", app), ("answer", answer)])
    }

    var text: String { registry.emitToString() }

    /// Each metric's name and the `# HELP` line `/metrics` serves for it (docs/operations.md lists
    /// the same metrics). One text per name: the registry stops the process if a name is made again
    /// with another.
    enum Metric: String, CaseIterable {
        case webhooksAccepted = "push_relay_webhooks_accepted_total"
        case deliveriesQueued = "push_relay_deliveries_queued_total"
        case pushOutcomes = "push_relay_push_outcomes_total"
        case deliveryLatency = "push_relay_delivery_latency_seconds"
        case zendeskForwardedTokens = "push_relay_zendesk_forwarded_tokens_total"
        case zendeskForwardFailures = "push_relay_zendesk_forward_failures_total"
        case bulkUnregisterRemoved = "push_relay_bulk_unregister_removed_total"
        case bulkUnregisterNotFound = "push_relay_bulk_unregister_not_found_total"
        case eventsSent = "push_relay_events_sent_total"
        case eventSendFailures = "push_relay_event_send_failures_total"
        case eventsQueued = "push_relay_events_queued"
        case retentionPrunedRows = "push_relay_retention_pruned_rows_total"
        case retentionDroppedPartitions = "push_relay_retention_dropped_partitions_total"
        case historyPartitionDaysAhead = "push_relay_history_partition_days_ahead"
        case unreadPolls = "push_relay_unread_polls_total"
        case unreadStreamsRefused = "push_relay_unread_streams_refused_total"
        case connectionsRefused = "push_relay_connections_refused_total"

        var help: String {
            switch self {
            case .webhooksAccepted: "Webhooks answered 202."
            case .deliveriesQueued: "Deliveries stored by accepted webhooks."
            case .pushOutcomes: "Results of delivery attempts, by platform and outcome."
            case .deliveryLatency:
                "Seconds from a delivery's storing to the provider accepting the push, for delivered pushes."
            case .zendeskForwardedTokens: "Dead tokens Zendesk's bulk-unregister API accepted."
            case .zendeskForwardFailures: "Failed calls to Zendesk's bulk-unregister API, by reason."
            case .bulkUnregisterRemoved: "Devices removed by bulk-unregister jobs."
            case .bulkUnregisterNotFound: "Bulk-unregister job lines that named no registered device."
            case .eventsSent: "Feedback events the app's receiver accepted."
            case .eventSendFailures: "Failed requests to the app's feedback events receiver, by reason."
            case .eventsQueued: "Feedback events of the app waiting to be sent (counted up to 100,000)."
            case .retentionPrunedRows: "Rows deleted by retention, by table."
            case .retentionDroppedPartitions: "History partitions retention dropped whole, by table."
            case .historyPartitionDaysAhead:
                "Days from today to the end of the newest history partition; 0 or less: none covers today."
            case .unreadPolls: "Unread count polls, by how they were answered (cached, cached_routed, read)."
            case .unreadStreamsRefused:
                "Live unread streams refused 429: the user, the credential, the app or the instance had the most allowed open."
            case .connectionsRefused:
                "Connections answered 503 over_capacity: the share of connections kept for webhook intake was reached."
            }
        }

        /// The name whole as `metricName` (the registry joins the parts it is given with `_`).
        var descriptor: MetricNameDescriptor {
            MetricNameDescriptor(metricName: rawValue, unitName: "", helpText: help)
        }
    }
}

/// `GET /metrics`.
struct MetricsController<Context: RequestContext>: Sendable {
    let metrics: RelayMetrics

    var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self).get("/metrics", use: serve)
    }

    @Sendable func serve(_ request: Request, context: Context) async throws -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: metrics.text))
        )
    }
}
