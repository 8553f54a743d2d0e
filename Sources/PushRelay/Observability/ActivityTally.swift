import Foundation
import Synchronization

/// What this instance counted since it last wrote to `activity_minutes`: webhooks accepted and
/// final delivery outcomes per app and minute, and the last credential rejection per app and
/// platform. Fed by ``RelayMetrics`` (one lock per count, no I/O); ``ActivityWriter`` adds it to
/// PostgreSQL every few seconds, where the Overview reads every instance's sum.
final class ActivityTally: Sendable {
    struct Key: Hashable {
        var app: String
        /// Seconds since 1970, a multiple of 60.
        var minute: Int64
    }

    /// Webhooks accepted and final outcomes; also the operator API's `activity` answer.
    struct Counts: Codable, Sendable, Equatable {
        var webhooks: Int64 = 0
        var delivered: Int64 = 0
        var failed: Int64 = 0
        var expired: Int64 = 0
        var deadToken: Int64 = 0
        var skipped: Int64 = 0

        enum CodingKeys: String, CodingKey {
            case webhooks, delivered, failed, expired, skipped
            case deadToken = "dead_token"
        }

        static func + (lhs: Counts, rhs: Counts) -> Counts {
            Counts(
                webhooks: lhs.webhooks + rhs.webhooks,
                delivered: lhs.delivered + rhs.delivered,
                failed: lhs.failed + rhs.failed,
                expired: lhs.expired + rhs.expired,
                deadToken: lhs.deadToken + rhs.deadToken,
                skipped: lhs.skipped + rhs.skipped
            )
        }
    }

    struct Rejection: Equatable {
        var at: Date
        var reason: String
    }

    private let state = Mutex<(counts: [Key: Counts], rejections: [String: [String: Rejection]])>(([:], [:]))

    static func minute(_ date: Date) -> Int64 {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        return seconds - seconds % 60
    }

    func webhook(app: String, at date: Date = Date()) {
        let key = Key(app: app, minute: Self.minute(date))
        state.withLock { $0.counts[key, default: Counts()].webhooks += 1 }
    }

    /// Counts final outcomes only (delivered, failed, expired, dead_token, skipped); a retry or a
    /// hand-back is not an outcome of the delivery.
    func outcome(app: String, outcome: DeliveryOutcome, at date: Date = Date()) {
        let field: WritableKeyPath<Counts, Int64>
        switch outcome {
        case .delivered: field = \.delivered
        case .failed, .unsendable: field = \.failed
        case .expired: field = \.expired
        case .deadToken: field = \.deadToken
        case .skipped: field = \.skipped
        case .retry, .credential, .lapsed, .handedBack: return
        }
        let key = Key(app: app, minute: Self.minute(date))
        state.withLock { $0.counts[key, default: Counts()][keyPath: field] += 1 }
    }

    func credentialRejected(app: String, platform: String, reason: String, at date: Date = Date()) {
        state.withLock { $0.rejections[app, default: [:]][platform] = Rejection(at: date, reason: reason) }
    }

    /// Everything counted since the last call, and forgets it.
    func take() -> (counts: [Key: Counts], rejections: [String: [String: Rejection]]) {
        state.withLock { state in
            defer { state = ([:], [:]) }
            return state
        }
    }

    /// Puts back what a failed write took, so the next write carries it.
    func restore(_ taken: (counts: [Key: Counts], rejections: [String: [String: Rejection]])) {
        state.withLock { state in
            for (key, counts) in taken.counts {
                state.counts[key] = state.counts[key, default: Counts()] + counts
            }
            for (app, byPlatform) in taken.rejections {
                for (platform, rejection) in byPlatform where state.rejections[app]?[platform] == nil {
                    state.rejections[app, default: [:]][platform] = rejection
                }
            }
        }
    }
}
