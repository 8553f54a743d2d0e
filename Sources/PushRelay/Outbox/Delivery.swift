import Foundation
import Postgres

/// A row's `deliveries.status`.
enum DeliveryStatus: String, Sendable, Hashable, CaseIterable {
    /// Waiting to be claimed (new, retried, or handed back), due at `next_attempt_at`.
    case pending
    /// Claimed under a lease; when the lease ends unfinished, the row is due again.
    case sending
    case delivered
    /// Rejected for good: a request the provider refused, or one that could not be built.
    case failed
    /// The provider reported the device token dead (unregistered, or not a token of the app).
    case deadToken = "dead_token"
    /// Out of attempts, or older than `delivery.max_age_seconds`.
    case expired
    /// Not sent: the device was invalidated or unregistered after the delivery was queued.
    case skipped
}

/// A row's `deliveries.kind`.
enum DeliveryKind: String, Sendable, Hashable {
    /// An agent's reply: title, body, ticket and badge.
    case alert
    /// A silent update of the badge after the owner read on another device.
    case badgeSync = "badge_sync"
}

/// What became of a delivery, as the metric `push_relay_deliveries_total{outcome}` names it.
enum DeliveryOutcome: String, Sendable, Hashable, CaseIterable {
    case delivered
    /// Will be tried again after a backoff (the attempt counts).
    case retry
    /// The app's credentials or connection settings were refused; waits without using an attempt.
    case credential
    /// The provider says the token is dead: the device is invalidated and forwarded to Zendesk.
    case deadToken = "dead_token"
    /// Refused for good by the provider, or the app has no section for the platform.
    case failed
    /// The relay could not build the request (nothing was sent).
    case unsendable
    case expired
    case skipped
    /// Waited for a sender past what its lease allows; handed back to be claimed again.
    case lapsed
    /// Still waiting for a sender at shutdown; handed back to be claimed at once.
    case handedBack = "handed_back"
}

/// A delivery claimed for this instance, with what is needed to build its push.
struct ClaimedDelivery: Sendable, Equatable {
    var id: Int64
    var appID: String
    var token: String
    var platform: Platform
    var kind: DeliveryKind
    /// Attempts including this one.
    var attempts: Int
    var createdAt: Date
    /// Empty for a badge sync, which belongs to no notification.
    var ticketID: String
    var title: String
    var body: String
    /// The device's registered environment, when it has one (APNs host choice).
    var environment: String?
    /// False when the device was invalidated after the delivery was queued.
    var deviceActive: Bool
    /// The owner's total unread count, when counters exist.
    var badge: Int?
    /// The notification of an alert (`nil` for a badge sync); pushes carry it as
    /// `push_relay_notification_id`, for the app's read-up-to.
    var notificationID: Int64? = nil
    /// False when the notification's text was not stored (its app's content was `generic` when
    /// the webhook came): the push can only be generic.
    var textStored = true
    /// The notification came for an `encrypted` app: its text is erased once every delivery ended.
    var erasesText = false
    /// The device's `push_key`, when it registered one.
    var pushKey: StoredPushKey? = nil
    /// Taken just before the statement that claimed the row: its lease ends no earlier than this
    /// plus the lease.
    var claimedAt: ContinuousClock.Instant
}

extension ClaimedDelivery {
    /// The select list every statement that claims deliveries returns, in this order; ``init(row:at:claimedAt:)``
    /// reads it. Aliases: `c` the claimed delivery row, `n` its notification, `dv` its device, and
    /// `badge` the owner's total unread count.
    static let columns =
        "c.id, c.app_id, c.device_token, c.platform, c.kind, c.attempts, c.created_at, n.ticket_id, n.title, n.body, dv.environment, "
        + "coalesce(dv.status = 'active', false), badge, c.notification_id, coalesce(n.content = 'encrypted', false), "
        + "dv.push_key_id, dv.push_key, dv.push_key_sealed_by"

    /// The delivery in a row that holds ``columns`` from column `offset` on.
    init(row: PostgresRow, at offset: Int = 0, claimedAt: ContinuousClock.Instant) throws {
        let platform = try row.decode(String.self, at: offset + 3)
        let kind = try row.decode(String.self, at: offset + 4)
        let title = try row.decode(String?.self, at: offset + 8)
        var pushKey: StoredPushKey?
        if let id = try row.decode(String?.self, at: offset + 15),
            let bytes = try row.decode(Data?.self, at: offset + 16)
        {
            pushKey = StoredPushKey(id: id, bytes: bytes, sealedBy: try row.decode(String?.self, at: offset + 17))
        }
        self.init(
            id: try row.decode(Int64.self, at: offset),
            appID: try row.decode(String.self, at: offset + 1),
            token: try row.decode(String.self, at: offset + 2),
            platform: try Platform(rawValue: platform).orThrow("unknown platform \(platform)"),
            kind: try DeliveryKind(rawValue: kind).orThrow("unknown delivery kind \(kind)"),
            attempts: try row.decode(Int.self, at: offset + 5),
            createdAt: try row.decode(Date.self, at: offset + 6),
            ticketID: try row.decode(String?.self, at: offset + 7) ?? "",
            title: title ?? "",
            body: try row.decode(String?.self, at: offset + 9) ?? "",
            environment: try row.decode(String?.self, at: offset + 10),
            deviceActive: try row.decode(Bool.self, at: offset + 11),
            badge: try row.decode(Int?.self, at: offset + 12),
            notificationID: try row.decode(Int64?.self, at: offset + 13),
            textStored: title != nil,
            erasesText: try row.decode(Bool.self, at: offset + 14),
            pushKey: pushKey,
            claimedAt: claimedAt
        )
    }
}

extension Optional {
    fileprivate func orThrow(_ message: @autoclosure () -> String) throws -> Wrapped {
        guard let self else { throw PostgresError(code: .decoding, message: message()) }
        return self
    }
}

/// What became of one claimed delivery: the row's new state, written back by ``DeliveryQueue/store(_:owner:)``.
struct DeliveryResult: Sendable, Equatable {
    var delivery: ClaimedDelivery
    var status: DeliveryStatus
    var outcome: DeliveryOutcome
    /// When a `pending` row is due again; `nil` keeps the row's (the end of its lease).
    var nextAttemptAt: Date? = nil
    /// The apns-id or FCM message name of a delivered push.
    var providerID: String? = nil
    /// The provider's or the relay's reason, kept as `last_error`.
    var reason: String? = nil
    /// False when the attempt is given back: the credentials were refused, or it was never sent.
    var countsAttempt = true
    /// For a dead token: when the provider says it stopped being valid, if it said.
    var deadSince: Date? = nil
    /// The APNs environment that accepted a device registered without one.
    var learnedEnvironment: String? = nil

    var isDeadToken: Bool { outcome == .deadToken }

    /// Back to `pending` without counting the attempt, due at `next` (`nil`: when its lease would
    /// have ended).
    static func handedBack(
        _ delivery: ClaimedDelivery,
        outcome: DeliveryOutcome,
        next: Date?,
        reason: String?
    ) -> DeliveryResult {
        DeliveryResult(
            delivery: delivery,
            status: .pending,
            outcome: outcome,
            nextAttemptAt: next,
            reason: reason,
            countsAttempt: false
        )
    }
}

/// A device's `push_key` as the `devices` row keeps it: the 32 key bytes, sealed with the
/// apps-store key when one is configured (``sealedBy`` names it), and the key's id.
struct StoredPushKey: Sendable, Hashable {
    var id: String
    var bytes: Data
    /// The ``ManagedAppKey/id`` the bytes are sealed with; `nil` when stored as given.
    var sealedBy: String?
}
