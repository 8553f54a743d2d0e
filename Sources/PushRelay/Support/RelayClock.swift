/// Time as a dependency: a part that reads the time or waits takes a clock, so its tests drive
/// time instead of waiting for it (a test clock lives with the tests). ``system`` is the real one.
struct RelayClock: Sendable {
    /// The time now.
    let now: @Sendable () -> ContinuousClock.Instant
    /// Returns at `deadline` (or throws when the task is cancelled).
    let sleepUntil: @Sendable (ContinuousClock.Instant) async throws -> Void

    init(
        now: @escaping @Sendable () -> ContinuousClock.Instant,
        sleepUntil: @escaping @Sendable (ContinuousClock.Instant) async throws -> Void
    ) {
        self.now = now
        self.sleepUntil = sleepUntil
    }

    /// Any clock on the monotonic clock's instants (a test's clock that it moves by hand).
    init<Source: Clock & Sendable>(_ source: Source) where Source.Instant == ContinuousClock.Instant {
        self.init(now: { source.now }, sleepUntil: { try await source.sleep(until: $0, tolerance: nil) })
    }

    /// The system's monotonic clock.
    static let system = RelayClock(now: { ContinuousClock.now }, sleepUntil: { try await Task.sleep(until: $0, clock: .continuous) })

    /// Returns after `duration` of this clock.
    func sleep(for duration: Duration) async throws {
        try await sleepUntil(now() + duration)
    }
}
