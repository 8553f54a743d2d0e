import Crypto
import Foundation
import HTTPTypes
import NIOCore

/// Zendesk's webhook signature: `X-Zendesk-Webhook-Signature` =
/// base64(HMAC-SHA256(signing secret, `X-Zendesk-Webhook-Signature-Timestamp` + body)).
///
/// The timestamp must be within `tolerance` of now, so a captured request cannot be replayed later.
struct WebhookSignature: Sendable {
    /// Any one of them may have signed (two while a secret is rotated).
    let secrets: [SymmetricKey]
    let tolerance: Double

    init(secret: String, tolerance: Double) {
        self.init(secrets: [secret], tolerance: tolerance)
    }

    init(secrets: [String], tolerance: Double) {
        self.secrets = secrets.map { SymmetricKey(data: Data($0.utf8)) }
        // Bounded, so the refusal's message (which prints it as an integer) cannot trap on a NaN or huge setting.
        self.tolerance = tolerance.isFinite ? min(max(tolerance, 0), 1e9) : 300
    }

    /// Throws 401 with the reason when the signature is missing, stale or wrong.
    func verify(signature: String?, timestamp: String?, body: ByteBuffer, now: Date = Date()) throws {
        guard let signature, let timestamp else {
            throw Self.rejected(
                "X-Zendesk-Webhook-Signature and X-Zendesk-Webhook-Signature-Timestamp are required for this app"
            )
        }
        guard let time = Self.parse(timestamp) else {
            throw Self.rejected("X-Zendesk-Webhook-Signature-Timestamp must be an ISO 8601 time or Unix seconds")
        }
        guard abs(time.timeIntervalSince(now)) <= tolerance else {
            throw Self.rejected(
                "the webhook signature timestamp is outside the accepted window of \(Int(tolerance)) seconds"
            )
        }
        guard let mac = Data(base64Encoded: signature) else {
            throw Self.rejected("the webhook signature is not base64")
        }
        var signed = Data(timestamp.utf8)
        signed.append(contentsOf: body.readableBytesView)
        guard
            secrets.contains(where: { HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: signed, using: $0) })
        else {
            throw Self.rejected("the webhook signature does not match")
        }
    }

    /// The header's time: Unix seconds (any 64-bit integer; a far one is simply outside the window)
    /// or ISO 8601. Nothing the sender writes here can trap.
    static func parse(_ timestamp: String) -> Date? {
        if let seconds = Int64(timestamp) { return Date(timeIntervalSince1970: Double(seconds)) }
        return try? Date(timestamp, strategy: .iso8601)
    }

    static func rejected(_ message: String) -> APIError {
        APIError(.unauthorized, code: "invalid_signature", message: message)
    }
}
