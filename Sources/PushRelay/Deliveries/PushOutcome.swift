import Foundation

/// What a provider's answer means for the delivery (PROTOCOLS.md), for APNs and FCM alike.
enum PushOutcome: Equatable, Sendable {
    /// Delivered; keep the provider's id (apns-id, FCM message name). `environment` is set when
    /// APNs accepted a device of unknown environment on the other environment's host.
    case delivered(providerID: String?, environment: String? = nil)
    /// Try again later (5xx, 429, idle timeout), after `retryAfter` when APNs said so.
    case retry(reason: String, retryAfter: Int?)
    /// The request itself is wrong; retrying cannot help.
    case permanent(reason: String)
    /// The token is dead: mark the device invalid and forward it to Zendesk. `since` is when APNs
    /// says it stopped being valid (410 `timestamp`): a device registered again after that keeps
    /// its registration.
    case deadToken(reason: String, since: Date? = nil)
    /// Our credentials are wrong or expired: refresh once, then alarm; the push is not at fault.
    case credential(reason: String, refreshToken: Bool)
    /// The relay could not build a request for this push (curl refused a header or the URL);
    /// nothing was sent, and sending again would fail the same way.
    case unsendable(reason: String)
}
