import Foundation
import Postgres

/// Named leases in the `leases` table, for work one instance at a time does: retention runs, and
/// sending one app's events (so they leave in order). A holder renews its lease while it works;
/// a crashed holder's lease runs out and another instance takes it.
struct Leases: Sendable {
    let client: PostgresClient
    /// This instance's name in `leases.owner`.
    let owner: String

    /// Takes or renews the lease `name` for `duration`; false when another owner holds it.
    func acquire(_ name: String, for duration: Duration) async throws -> Bool {
        try await client.query(
            """
            INSERT INTO leases AS l (name, owner, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3))
            ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
            WHERE l.owner = excluded.owner OR l.expires_at < now()
            RETURNING 1
            """,
            [name, owner, duration.timeInterval]
        ).rows.count == 1
    }

    /// Gives the lease up (if this instance holds it), so another instance need not wait for it to lapse.
    func release(_ name: String) async throws {
        _ = try await client.query("DELETE FROM leases WHERE name = $1 AND owner = $2", [name, owner])
    }
}

/// A lease this instance holds or wants, renewed when half of it has passed.
struct HeldLease: Sendable {
    let name: String
    let duration: Duration
    /// When half of it has passed, on this clock.
    let clock: RelayClock
    private var renewAfter: ContinuousClock.Instant?

    init(name: String, duration: Duration, clock: RelayClock = .system) {
        self.name = name
        self.duration = duration
        self.clock = clock
    }

    /// Whether this instance holds the lease now, asking the database only when it does not know
    /// (not held, or half of it passed).
    mutating func hold(with leases: Leases) async throws -> Bool {
        if let renewAfter, renewAfter > clock.now() { return true }
        let start = clock.now()
        if try await leases.acquire(name, for: duration) {
            renewAfter = start + duration / 2
            return true
        }
        renewAfter = nil
        return false
    }

    /// Whether the last ``hold(with:)`` found it held and half of it has not passed.
    var isHeld: Bool { renewAfter.map { $0 > clock.now() } ?? false }

    mutating func forget() { renewAfter = nil }
}
