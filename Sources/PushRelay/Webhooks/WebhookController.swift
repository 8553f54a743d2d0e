import Configuration
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// `POST /v1/webhooks/zendesk/{app}/{secret}`: the Zendesk Support SDK push webhook.
struct WebhookController<Context: RequestContext>: Sendable {
    let apps: AppDirectory
    let writer: IntakeWriter
    let settings: WebhookSettings
    let metrics: RelayMetrics

    var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .post("/v1/webhooks/zendesk/{app}/{secret}", use: receive)
    }

    /// The 202 body, `{"notification_id":…,"deliveries":…,"skipped":…}`: three integers, written
    /// directly: a `JSONEncoder` per webhook took about 2 % of the machine in the ingest benchmark.
    struct Accepted: Sendable, Hashable {
        var notificationID: Int64
        var deliveries: Int
        var skipped: Int

        var response: Response {
            Response(
                status: .accepted,
                headers: [.contentType: "application/json; charset=utf-8"],
                body: ResponseBody(byteBuffer: body)
            )
        }

        var body: ByteBuffer {
            ByteBuffer(
                string: #"{"notification_id":\#(notificationID),"deliveries":\#(deliveries),"skipped":\#(skipped)}"#
            )
        }
    }

    /// Unknown app and wrong secret give this same answer.
    static var notFound: APIError { APIError(.notFound, code: "not_found", message: "not found") }

    @Sendable func receive(_ request: Request, context: Context) async throws -> Response {
        let app = try context.pathParameter("app")
        let secret = try context.pathParameter("secret")
        guard let configuration = apps.webhookApp(app, secret: secret) else { throw Self.notFound }

        var request = request
        let webhook = try settings.notification(
            body: try await request.collectJSONBytes(context: context),
            signingSecrets: configuration.webhookSigningSecrets,
            signature: request.headers[.zendeskSignature],
            timestamp: request.headers[.zendeskSignatureTimestamp]
        )
        let requestID = context.logger[metadataKey: "request.id"].map { "\($0)" }
        // An `IntakeError` becomes its answer in `APIError.from`, as on the event loop's path.
        let item = IntakeItem(
            appID: app,
            notification: webhook,
            requestID: requestID,
            content: configuration.push?.content ?? .full
        )
        let receipt = try await writer.submit(item)
        return Self.accepted(receipt, app: app, metrics: metrics, logger: context.logger).response
    }
}

extension WebhookController {
    /// Counts and logs a stored webhook, and gives its answer: what both intake paths (the router's
    /// and ``WebhookShortcut``'s) do once the writer has committed it.
    static func accepted(_ receipt: IntakeReceipt, app: String, metrics: RelayMetrics, logger: Logger) -> Accepted {
        metrics.webhooksAccepted(app: app, deliveries: receipt.deliveries)
        logger.debug(
            "webhook accepted",
            metadata: [
                "push.app": "\(app)", "push.notification_id": "\(receipt.notificationID)",
                "push.deliveries": "\(receipt.deliveries)", "push.skipped": "\(receipt.skipped)",
            ]
        )
        return Accepted(
            notificationID: receipt.notificationID,
            deliveries: receipt.deliveries,
            skipped: receipt.skipped
        )
    }
}

extension AppDirectory {
    /// The app a webhook to `app` with `secret` is for; `nil` for an unknown app or a wrong secret.
    func webhookApp(_ app: String, secret: String) -> AppConfiguration? {
        acceptsWebhook(app: app, secret: secret) ? self.app(app) : nil
    }
}

extension WebhookSettings {
    /// A webhook's checks, the same on both intake paths (the router's and ``WebhookShortcut``'s):
    /// its signature when the app requires one, then its body.
    func notification(
        body: ByteBuffer,
        signingSecrets: [String],
        signature: String?,
        timestamp: String?
    ) throws -> PushNotification {
        if !signingSecrets.isEmpty {
            try WebhookSignature(secrets: signingSecrets, tolerance: limits.signatureTolerance).verify(
                signature: signature,
                timestamp: timestamp,
                body: body
            )
        }
        return try PushNotification(zendeskWebhook: try JSONBody(buffer: body), maxDevices: limits.maxDevices)
    }
}

extension IntakeError: APIErrorConvertible {
    /// The answer to a webhook intake did not store.
    var apiError: APIError {
        switch self {
        case .shuttingDown:
            APIError(.serviceUnavailable, code: "shutting_down", message: "the relay is shutting down; retry")
        case .databaseUnavailable: .databaseUnavailable()
        case .unstorable:
            APIError(
                .badRequest,
                code: "unstorable_input",
                message: "the webhook holds a value the database cannot store"
            )
        }
    }
}

extension HTTPField.Name {
    static let zendeskSignature = HTTPField.Name("X-Zendesk-Webhook-Signature")!
    static let zendeskSignatureTimestamp = HTTPField.Name("X-Zendesk-Webhook-Signature-Timestamp")!
}

/// Webhook intake settings.
///
/// Keys, read from a reader scoped to `webhooks`:
/// - `max_devices` (int, default 1000): devices accepted in one webhook.
/// - `signature_tolerance_seconds` (double, default 300): replay window for signed webhooks.
/// - `batch_size` (int, default 500): most webhooks stored by one group commit.
/// - `concurrent_writes` (int, default 2): group commits in flight at once.
/// - `concurrent_write_after_ms` (int, default 5; 0 starts one at once): while group commits are
///   in flight, another starts beside them only once each has taken this long; until then the
///   next batch grows (``IntakeWriter``).
/// - `pace_waiting_deliveries` (int, default 250; 0 turns it off) and `pace_max_wait_ms` (int,
///   default 250): while more of this instance's deliveries than that wait for a sender, the next
///   group commit is held back, up to that long (``IntakeWriter``). On a saturated instance this
///   keeps delivery up with intake: the backlog and the commit→outcome tail stay short, and fewer
///   deliveries fall back to a claim query (docs/benchmarks.md).
///
/// `max_devices` and `signature_tolerance_seconds` change with a reload (``Limits``); the others
/// are read at start.
public struct WebhookSettings: Sendable {
    /// The limits a reload changes, shared by every copy of these settings.
    final class Limits: Sendable {
        private let devices: Atomic<Int>
        private let tolerance: Atomic<UInt64>

        init(maxDevices: Int, signatureTolerance: Double) {
            devices = Atomic(maxDevices)
            tolerance = Atomic(signatureTolerance.bitPattern)
        }

        var maxDevices: Int { devices.load(ordering: .relaxed) }
        var signatureTolerance: Double { Double(bitPattern: tolerance.load(ordering: .relaxed)) }

        func set(maxDevices: Int, signatureTolerance: Double) {
            devices.store(maxDevices, ordering: .relaxed)
            tolerance.store(signatureTolerance.bitPattern, ordering: .relaxed)
        }
    }

    /// The keys ``Limits`` follows (a reload applies them).
    static let reloadableKeys = ["webhooks.max_devices", "webhooks.signature_tolerance_seconds"]

    public var maxDevices: Int
    public var signatureTolerance: Double
    let limits: Limits
    public var batchSize: Int
    public var concurrentWrites: Int
    public var concurrentWriteAfter: Duration
    public var paceWaitingDeliveries: Int
    public var paceMaxWait: Duration

    /// The defaults, or the values given.
    public init(
        maxDevices: Int = 1000,
        signatureTolerance: Double = 300,
        batchSize: Int = 500,
        concurrentWrites: Int = 2,
        concurrentWriteAfter: Duration = .milliseconds(5),
        paceWaitingDeliveries: Int = 250,
        paceMaxWait: Duration = .milliseconds(250)
    ) {
        self.maxDevices = maxDevices
        self.signatureTolerance = signatureTolerance
        self.batchSize = batchSize
        self.concurrentWrites = concurrentWrites
        self.concurrentWriteAfter = concurrentWriteAfter
        self.paceWaitingDeliveries = paceWaitingDeliveries
        self.paceMaxWait = paceMaxWait
        limits = Limits(maxDevices: maxDevices, signatureTolerance: signatureTolerance)
    }

    public init(config: ConfigReader) {
        self.init(
            maxDevices: max(1, config.int(forKey: "max_devices", default: 1000)),
            signatureTolerance: config.double(forKey: "signature_tolerance_seconds", default: 300),
            batchSize: config.int(forKey: "batch_size", default: 500),
            concurrentWrites: config.int(forKey: "concurrent_writes", default: 2),
            concurrentWriteAfter: .milliseconds(
                min(1000, max(0, config.int(forKey: "concurrent_write_after_ms", default: 5)))
            ),
            paceWaitingDeliveries: max(0, config.int(forKey: "pace_waiting_deliveries", default: 250)),
            paceMaxWait: .milliseconds(min(5000, max(0, config.int(forKey: "pace_max_wait_ms", default: 250))))
        )
    }

    /// A reload: `other`'s limits are used by every copy of these settings from now on.
    func applyLimits(of other: WebhookSettings) {
        limits.set(maxDevices: other.maxDevices, signatureTolerance: other.signatureTolerance)
    }
}
