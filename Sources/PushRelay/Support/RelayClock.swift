import Foundation

/// Time as a dependency: a part that reads the time or waits takes a clock, so its tests drive
/// time instead of waiting for it (a test clock lives with the tests). ``system`` is the real one.
struct RelayClock: Sendable {
    /// The time now.
    let now: @Sendable () -> ContinuousClock.Instant
    /// Returns at `deadline` (or throws when the task is cancelled).
    let sleepUntil: @Sendable (ContinuousClock.Instant) async throws -> Void
    /// The wall-clock date now, for what expires at a date (a user token's `exp`).
    let date: @Sendable () -> Date

    init(
        now: @escaping @Sendable () -> ContinuousClock.Instant,
        sleepUntil: @escaping @Sendable (ContinuousClock.Instant) async throws -> Void,
        date: @escaping @Sendable () -> Date
    ) {
        self.now = now
        self.sleepUntil = sleepUntil
        self.date = date
    }

    /// Any clock on the monotonic clock's instants (a test's clock that it moves by hand); its
    /// dates start at today's and move with it.
    init<Source: Clock & Sendable>(_ source: Source) where Source.Instant == ContinuousClock.Instant {
        let (startInstant, startDate) = (source.now, Date())
        self.init(
            now: { source.now },
            sleepUntil: { try await source.sleep(until: $0, tolerance: nil) },
            date: { startDate.addingTimeInterval((source.now - startInstant).timeInterval) }
        )
    }

    /// The system's clocks.
    static let system = RelayClock(
        now: { ContinuousClock.now },
        sleepUntil: { try await Task.sleep(until: $0, clock: .continuous) },
        date: { Date() }
    )

    /// Returns after `duration` of this clock.
    func sleep(for duration: Duration) async throws {
        try await sleepUntil(now() + duration)
    }
}
