import Synchronization
import Testing

@testable import PushRelay

/// `/ready`'s shared check (``RecentResult``), on a clock the test moves.
@Suite("A check shared for a second")
struct RecentResultTests {
    final class Clock: Sendable {
        let instant = Mutex(ContinuousClock.now)
        func advance(_ by: Duration) { instant.withLock { $0 += by } }
        var now: ContinuousClock.Instant { instant.withLock { $0 } }
    }

    struct Failed: Error {}

    @Test("callers within a second share one check, concurrent callers wait for the running one, and a failure is shared the same way")
    func sharesOneCheck() async throws {
        let clock = Clock()
        let recent = RecentResult<Int>(maxAge: .seconds(1), now: { clock.now })
        let checks = Mutex(0)
        let fail = Mutex(false)
        let check: @Sendable () async throws -> Int = {
            let n = checks.withLock { count in
                count += 1
                return count
            }
            // Let the other callers arrive while this check runs.
            for _ in 0..<20 { await Task.yield() }
            if fail.withLock({ $0 }) { throw Failed() }
            return n
        }
        let first = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<50 { group.addTask { try await recent.value(check) } }
            return try await group.reduce(into: Set<Int>()) { $0.insert($1) }
        }
        #expect(first == [1])
        #expect(checks.withLock { $0 } == 1)

        clock.advance(.milliseconds(900))
        #expect(try await recent.value(check) == 1)
        #expect(checks.withLock { $0 } == 1)

        clock.advance(.milliseconds(200))
        #expect(try await recent.value(check) == 2)
        #expect(checks.withLock { $0 } == 2)

        clock.advance(.seconds(2))
        fail.withLock { $0 = true }
        await #expect(throws: Failed.self) { try await recent.value(check) }
        await #expect(throws: Failed.self) { try await recent.value(check) }
        #expect(checks.withLock { $0 } == 3)
    }
}
