import Foundation
import Synchronization

/// This instance's copy of the live API keys (prefix, hash of the whole key, metadata), so that a
/// request with an API key costs no database query.
///
/// The copy is trusted for ``freshness`` (one second): after that, the next request reads
/// `api_key_generation` and `console_session_generation` (a row each; triggers set them to a new
/// random value with every change to `api_keys`, and every console session opened or ended, on
/// any instance or from the CLI) before it is answered. The keys and sessions are loaded again
/// when the keys' generation differs, the sessions alone when only theirs does (a sign-in). Random, not a
/// counter: after a failover to a standby that lacks the last changes, or a restore, a counter
/// would count up again to a value an instance holds, and hide the next change from it. A key
/// revoked anywhere therefore stops working everywhere within a second, and an idle instance
/// makes no query at all.
///
/// A prefix that is not in a complete copy is unknown: it is answered from memory too, after a
/// generation check that started after the request arrived (so a key created a moment before it
/// is found). Such checks are made at most once per ``missInterval`` and shared by every request
/// waiting for one, so a flood of made-up keys costs at most ten one-row reads a second and no
/// memory. The copy holds at most ``capacity`` keys (the newest); with more live keys than that,
/// prefixes outside it are looked up in the database, as before.
final class APIKeyCache: Sendable {
    /// A stored key as the cache holds it.
    struct Entry: Sendable {
        /// SHA-256 of the whole key.
        var hash: [UInt8]
        var record: APIKeyRecord
    }

    /// A console session as the cache holds it (``ConsoleSessionStore``), by its token's SHA-256.
    struct SessionEntry: Sendable {
        var session: ConsoleSessionStore.Session
        var createdAt: Date
        var lastSeenAt: Date
    }

    /// The keys as of one generation, and the console sessions of live keys as of one of theirs.
    struct Snapshot: Sendable {
        var generation: Int64
        var keys: [String: Entry]
        /// False when there were more live keys than ``APIKeyCache/capacity``.
        var complete: Bool
        var sessions: Sessions = Sessions()
    }

    /// The console sessions of live keys, by their tokens' SHA-256, as of one generation.
    struct Sessions: Sendable {
        var generation: Int64 = 0
        var entries: [Data: SessionEntry] = [:]
        /// False when there were more sessions than ``APIKeyCache/capacity`` (or none were read).
        var complete = false
    }

    /// How to read the database: the current generations (keys, sessions); the live keys and
    /// their sessions with the generations they belong to; the sessions alone.
    struct Loader: Sendable {
        var generation: @Sendable () async throws -> (keys: Int64, sessions: Int64)
        var keys: @Sendable (_ limit: Int) async throws -> Snapshot
        var sessions: @Sendable (_ limit: Int) async throws -> Sessions
    }

    /// How long a check of the generation is trusted for keys the copy knows.
    let freshness: Duration
    /// The shortest time between two checks made for unknown prefixes.
    let missInterval: Duration
    /// Most keys held.
    let capacity: Int
    /// Reads the time for freshness and paces the checks for unknown prefixes.
    let clock: RelayClock

    private struct State {
        var snapshot: Snapshot?
        /// When the last successful check started.
        var checkedAt: ContinuousClock.Instant?
        /// When the last check (successful or not) started.
        var lastStart: ContinuousClock.Instant?
        var refreshing = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    init(
        freshness: Duration = .seconds(1),
        missInterval: Duration = .milliseconds(100),
        capacity: Int = 10_000,
        clock: RelayClock = .system
    ) {
        self.freshness = freshness
        self.missInterval = missInterval
        self.capacity = max(1, capacity)
        self.clock = clock
    }

    /// Keys held now (for tests and metrics).
    var count: Int { state.withLock { $0.snapshot?.keys.count ?? 0 } }

    /// Forgets when the copy was last checked, so the next request checks again (after a change
    /// made by this process).
    func invalidate() {
        state.withLock { $0.checkedAt = nil }
    }

    /// A copy whose check started no earlier than `notBefore`; one check at a time is made, and
    /// requests needing one meanwhile wait for it. With `rateLimited`, a check starts at most once
    /// per ``missInterval``.
    func snapshot(notBefore: ContinuousClock.Instant, rateLimited: Bool, loader: Loader) async throws -> Snapshot {
        enum Step {
            case use(Snapshot)
            case wait
            case sleep(Duration)
            case refresh(Snapshot?)
        }
        while true {
            let now = clock.now()
            let step: Step = state.withLock { state in
                if let snapshot = state.snapshot, let checked = state.checkedAt, checked >= notBefore {
                    return .use(snapshot)
                }
                if state.refreshing { return .wait }
                if rateLimited, let last = state.lastStart, now - last < missInterval {
                    return .sleep(missInterval - (now - last))
                }
                state.refreshing = true
                state.lastStart = now
                return .refresh(state.snapshot)
            }
            switch step {
            case .use(let snapshot):
                return snapshot
            case .wait:
                await withCheckedContinuation { continuation in
                    let waiting = state.withLock { state in
                        guard state.refreshing else { return false }
                        state.waiters.append(continuation)
                        return true
                    }
                    if !waiting { continuation.resume() }
                }
            case .sleep(let duration):
                try await clock.sleep(for: duration)
            case .refresh(let old):
                let result: Result<Snapshot, any Error>
                do {
                    let generation = try await loader.generation()
                    if var copy = old, copy.generation == generation.keys {
                        // A sign-in or sign-out elsewhere: the sessions alone are read again.
                        if copy.sessions.generation != generation.sessions {
                            copy.sessions = try await loader.sessions(capacity)
                        }
                        result = .success(copy)
                    } else {
                        result = .success(try await loader.keys(capacity))
                    }
                } catch {
                    result = .failure(error)
                }
                let waiters = state.withLock { state in
                    state.refreshing = false
                    if case .success(let snapshot) = result {
                        state.snapshot = snapshot
                        state.checkedAt = now
                    }
                    defer { state.waiters = [] }
                    return state.waiters
                }
                // Waiters look again: they use the new copy, or (after a failure) try themselves.
                for waiter in waiters { waiter.resume() }
                return try result.get()
            }
        }
    }
}
