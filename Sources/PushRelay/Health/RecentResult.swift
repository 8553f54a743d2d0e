import Synchronization

/// The result of an expensive check, shared for ``maxAge``: callers within that time get the same
/// result, and while a check runs the others wait for it instead of starting their own. `/ready`
/// uses it, so a load balancer (or anyone, since the probe needs no credential) asking many times
/// a second costs PostgreSQL at most one check a second.
final class RecentResult<Value: Sendable>: Sendable {
    let maxAge: Duration
    /// The clock's now; tests pass one they move.
    let now: @Sendable () -> ContinuousClock.Instant

    private enum Step {
        case use(Result<Value, any Error>)
        case wait
        case run
    }

    private struct State {
        var last: (at: ContinuousClock.Instant, result: Result<Value, any Error>)?
        var running = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    init(maxAge: Duration = .seconds(1), now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.maxAge = maxAge
        self.now = now
    }

    /// The last result if it is at most ``maxAge`` old, else the result of a new `check` (one at a
    /// time; callers arriving meanwhile get its result).
    func value(_ check: @Sendable () async throws -> Value) async throws -> Value {
        while true {
            let start = now()
            let step: Step = state.withLock { state in
                if let last = state.last, start - last.at <= maxAge { return .use(last.result) }
                if state.running { return .wait }
                state.running = true
                return .run
            }
            switch step {
            case .use(let result):
                return try result.get()
            case .wait:
                await withCheckedContinuation { continuation in
                    let waiting = state.withLock { state in
                        guard state.running else { return false }
                        state.waiters.append(continuation)
                        return true
                    }
                    if !waiting { continuation.resume() }
                }
            case .run:
                let result: Result<Value, any Error>
                do { result = .success(try await check()) } catch { result = .failure(error) }
                let waiters = state.withLock { state in
                    state.running = false
                    state.last = (start, result)
                    defer { state.waiters = [] }
                    return state.waiters
                }
                for waiter in waiters { waiter.resume() }
                return try result.get()
            }
        }
    }
}
