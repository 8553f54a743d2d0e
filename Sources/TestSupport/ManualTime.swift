import Foundation
import Synchronization

/// A clock a test moves by hand: `now` stands still until ``advance(by:)``, and a sleeper wakes
/// when an advance reaches its deadline. Code under test takes it in place of the system's clock
/// (the relay's `RelayClock(time)`; it is a `Clock`), so a test of a timeout, a lease or a freshness window
/// advances time and asserts what happened, without waiting and whatever the machine's load.
public final class ManualTime: Clock, Sendable {
    public typealias Instant = ContinuousClock.Instant

    public var minimumResolution: Duration { .nanoseconds(1) }

    private struct Sleeper {
        var id: UInt64
        var deadline: ContinuousClock.Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: ContinuousClock.Instant
        var sleepers: [Sleeper] = []
        var nextID: UInt64 = 0
    }

    private let state: Mutex<State>

    public init(start: ContinuousClock.Instant = .now) {
        state = Mutex(State(now: start))
    }

    /// The clock's time.
    public var now: ContinuousClock.Instant { state.withLock { $0.now } }

    /// How many sleepers wait: a test advances once the code under test is asleep.
    public var sleepers: Int { state.withLock { $0.sleepers.count } }

    /// The deadlines the sleepers wait for, soonest first: a test tells which part sleeps by its
    /// deadline.
    public var deadlines: [ContinuousClock.Instant] { state.withLock { $0.sleepers.map(\.deadline).sorted() } }

    /// Returns once the clock reached `deadline` (at once when it has); throws `CancellationError`
    /// when the task is cancelled first.
    public func sleep(until deadline: ContinuousClock.Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ready = state.withLock { state in
                    if deadline <= state.now || Task.isCancelled { return true }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return false
                }
                if ready { continuation.resume() }
            }
            try Task.checkCancellation()
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock on by `duration` and wakes the sleepers whose deadline it reached.
    public func advance(by duration: Duration) {
        let woken = state.withLock { state in
            state.now = state.now + duration
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in woken { sleeper.continuation.resume() }
    }
}
