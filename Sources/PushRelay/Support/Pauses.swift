import Synchronization

/// Waits on a ``RelayClock`` that ``end()`` cuts short: at shutdown a part ends its pauses (the
/// outcome writer's spacing, the intake writer's overlap timer) instead of waiting them out,
/// whatever the clock, a test's one that no longer moves included. Cancelling the waiting task
/// ends its pause too.
final class Pauses: Sendable {
    private let clock: RelayClock
    private let state = Mutex<(pending: [Int: Task<Void, Never>], next: Int, ended: Bool)>(([:], 0, false))

    init(clock: RelayClock) {
        self.clock = clock
    }

    /// Returns at `deadline` of the clock, at ``end()``, or when the task is cancelled.
    func sleep(until deadline: ContinuousClock.Instant) async {
        let pause = Task { [clock] in _ = try? await clock.sleepUntil(deadline) }
        let id = state.withLock { state -> Int? in
            guard !state.ended else { return nil }
            state.next += 1
            state.pending[state.next] = pause
            return state.next
        }
        guard let id else {
            pause.cancel()
            return
        }
        await withTaskCancellationHandler {
            await pause.value
        } onCancel: {
            pause.cancel()
        }
        state.withLock { _ = $0.pending.removeValue(forKey: id) }
    }

    /// Returns after `duration` of the clock, at ``end()``, or when the task is cancelled.
    func sleep(for duration: Duration) async {
        await sleep(until: clock.now() + duration)
    }

    /// Ends every pause now, and each later one at once.
    func end() {
        let pending = state.withLock { state in
            state.ended = true
            defer { state.pending = [:] }
            return Array(state.pending.values)
        }
        for pause in pending { pause.cancel() }
    }
}
