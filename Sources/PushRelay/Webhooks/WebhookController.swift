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
