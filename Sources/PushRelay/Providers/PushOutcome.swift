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

/// A reason a provider gives in an answer: one of the `Known` reasons this relay tells apart, or
/// any other, kept as the provider spelled it (providers add reasons; an unknown one must still
/// be classified, by its HTTP status).
enum ProviderReason<Known: RawRepresentable & Hashable & Sendable>: Hashable, Sendable where Known.RawValue == String {
    case known(Known)
    case unknown(String)

    init(_ name: String) {
        self = Known(rawValue: name).map(Self.known) ?? .unknown(name)
    }

    /// The reason as the provider spells it.
    var name: String {
        switch self {
        case .known(let reason): reason.rawValue
        case .unknown(let name): name
        }
    }
}
