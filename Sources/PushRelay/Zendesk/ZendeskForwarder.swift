import CurlHTTP2
import Foundation
import Logging
import Postgres
import ServiceLifecycle
import Synchronization

/// Forwards queued dead and bulk-unregistered tokens to each app's Zendesk
/// (`POST /api/v2/push_notification_devices/destroy_many`, `{"push_notification_devices":[…]}`).
///
/// Rows of `zendesk_unregister_queue` are taken in batches of at most `batchSize` per app, leased
/// by pushing their `next_attempt_at` ahead (so instances share the queue), and marked
/// `forwarded_at` when Zendesk accepts them: each token is forwarded once. 429 and 5xx answers and
/// transport errors are retried with exponential backoff, or after `Retry-After` when Zendesk says;
/// Zendesk rate-limits per account, so a failure pauses that app's forwarding for the same time.
final class ZendeskForwarder: Service, Sendable {
    struct Target: Sendable {
        var app: String
        var url: String
        var authorization: String
    }

    private let queue: ZendeskQueue
    private let http: HTTP2Client
    /// The apps with a `zendesk` section; a reload replaces them.
    private let targets: Mutex<[Target]>
    private let batchSize: Int
    private let pollInterval: Duration
    private let retryBase: Duration
    private let maxRetryAfter: Duration
    private let logger: Logger
    private let metrics: RelayMetrics
    private let pausedUntil = Mutex<[String: ContinuousClock.Instant]>([:])
    /// Times the poll and the pauses.
    private let clock: RelayClock

    init(
        client: PostgresClient,
        apps: [(id: String, zendesk: ZendeskSettings)],
        settings: ZendeskForwarderSettings,
        caFile: String?,
        metrics: RelayMetrics = RelayMetrics(),
        logger: Logger,
        clock: RelayClock = .system
    ) throws {
        self.clock = clock
        queue = ZendeskQueue(client: client)
        self.metrics = metrics
        targets = Mutex(try Self.targets(apps))
        http = try HTTP2Client(configuration: .init(maxConnectionsPerHost: 1, maxConcurrentStreams: 10, caFile: caFile))
        batchSize = settings.batchSize
        pollInterval = settings.pollInterval
        retryBase = settings.retryBase
        maxRetryAfter = settings.maxRetryAfter
        self.logger = logger
    }

    /// The forwarding targets of `apps`; throws when a token file cannot be read.
    static func targets(_ apps: [(id: String, zendesk: ZendeskSettings)]) throws -> [Target] {
        try apps.map { app in
            Target(
                app: app.id,
                url: app.zendesk.baseURL + "/api/v2/push_notification_devices/destroy_many",
                authorization: try app.zendesk.authorization(app: app.id)
            )
        }
    }

    /// A reload: the next round forwards for `targets` (a batch being sent finishes as it began).
    /// An app whose account or token changed is not held back by a pause its old one earned.
    func update(_ targets: [Target]) {
        let old = self.targets.withLock { current in
            defer { current = targets }
            return current
        }
        let changed = targets.filter { target in
            !old.contains { $0.app == target.app && $0.url == target.url && $0.authorization == target.authorization }
        }
        pausedUntil.withLock { paused in
            for target in changed { paused[target.app] = nil }
        }
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                var busy = false
                for target in self.targets.withLock({ $0 }) {
                    busy = await self.forwardBatch(target, http: self.http) || busy
                }
                if !busy { try? await self.clock.sleep(for: self.pollInterval) }
            }
        }
        await self.http.shutdown()
    }

    /// Sends one batch of the app's due tokens; true when there was one.
    private func forwardBatch(_ target: Target, http: HTTP2Client) async -> Bool {
        if let until = pausedUntil.withLock({ $0[target.app] }), until > clock.now() { return false }
        let claimed: [(token: String, attempts: Int)]
        do {
            claimed = try await queue.takeZendeskBatch(app: target.app, limit: batchSize)
        } catch {
            logger.log(
                level: PostgresError.logLevel(for: error),
                "reading the Zendesk unregister queue failed",
                metadata: PostgresError.metadata(error)
            )
            return false
        }
        guard !claimed.isEmpty else { return false }
        let batch = claimed.map(\.token)
        let body = (try? JSONSerialization.data(withJSONObject: ["push_notification_devices": batch])) ?? Data()
        var retryAfter: Int?
        var problem: String?
        do {
            let response = try await http.send(
                HTTP2Request(
                    url: target.url,
                    headers: [("authorization", target.authorization), ("content-type", "application/json")],
                    body: Array(body),
                    timeout: .seconds(30)
                )
            )
            switch response.status {
            case 200..<300: break
            case 429, 500...599:
                retryAfter = RetryAfter.seconds(response.header("retry-after"))
                problem = "HTTP \(response.status)"
            default:
                // 401/403/404 are configuration problems; keep the tokens and retry slowly.
                problem = "HTTP \(response.status)"
                retryAfter = 300
            }
        } catch {
            problem = "transport: \(error)"
        }
        do {
            if let problem {
                // The batch's most tried token sets the pace (doubling stops after 12 attempts).
                let backoff = backoffDelay(
                    base: retryBase,
                    cap: retryBase * 4096,
                    attempt: claimed.map(\.attempts).max() ?? 1,
                    retryAfter: retryAfter,
                    maxRetryAfter: maxRetryAfter
                )
                let delay = backoff.timeInterval
                try await queue.zendeskBatchFailed(app: target.app, tokens: batch, retryIn: delay, reason: problem)
                pausedUntil.withLock { $0[target.app] = clock.now() + backoff }
                metrics.zendeskFailure(app: target.app, reason: problem.hasPrefix("transport") ? "transport" : problem)
                logger.warning(
                    "Zendesk bulk unregister failed; will retry",
                    metadata: [
                        "push.app": "\(target.app)", "push.tokens": "\(batch.count)", "push.reason": "\(problem)",
                        "push.retry_in_s": "\(delay)",
                    ]
                )
                return false
            }
            try await queue.zendeskBatchForwarded(app: target.app, tokens: batch)
            metrics.zendeskForwarded(app: target.app, tokens: batch.count)
            logger.debug(
                "tokens forwarded to Zendesk",
                metadata: ["push.app": "\(target.app)", "push.tokens": "\(batch.count)"]
            )
        } catch {
            logger.log(
                level: PostgresError.logLevel(for: error),
                "recording a Zendesk forward failed",
                metadata: PostgresError.metadata(error)
            )
        }
        return true
    }
}
