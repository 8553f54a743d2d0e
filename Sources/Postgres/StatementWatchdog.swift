import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Ends libpq calls that wait past their deadline by shutting their socket down.
///
/// libpq's calls block until the server answers. A server whose host vanished without a reset
/// (a partition, a crashed VM, a proxy that stopped forwarding) never answers, and TCP keepalives
/// do not help when something in between still acknowledges. The server's own
/// `statement_timeout` ends statements it is running; this watchdog covers a server that cannot be
/// heard at all: each guarded call announces its deadline, and one thread, waking a few times a
/// second, shuts down the socket of any call still waiting after it. The blocked call then
/// returns an error at once, and the connection, now broken, is discarded by its owner.
///
/// A cell holds a duplicate of the connection's descriptor, made when it is created and closed when
/// it is unregistered: libpq closes its own descriptor when it finds the connection broken, and
/// the number may then go to another connection at once, but the duplicate keeps the socket and
/// its number this cell's until the cell is done, so the watchdog can never shut down another
/// connection's socket.
final class StatementWatchdog: Sendable {
    /// The deadline of one connection's calls: 0 while no call is guarded, ``fired`` once the
    /// watchdog has shut the socket down.
    final class Cell: Sendable {
        /// This cell's own duplicate of the connection's descriptor (-1 if it could not be made:
        /// then the cell never shuts anything down).
        let socket: Int32
        let deadline = Atomic<UInt64>(0)
        static let fired = UInt64.max

        init(socket: Int32) { self.socket = socket >= 0 ? dup(socket) : -1 }

        /// Runs `body` with a deadline `timeout` from now (none when `nil`). Once fired, the cell
        /// stays fired: the connection is broken for good.
        func guarded<T>(_ timeout: Duration?, _ body: () throws -> T) rethrows -> T {
            guard let timeout, !hasFired else { return try body() }
            deadline.store(StatementWatchdog.now() &+ StatementWatchdog.nanoseconds(timeout), ordering: .releasing)
            defer {
                // Back to idle, unless the watchdog fired meanwhile (then the exchange fails).
                let current = deadline.load(ordering: .acquiring)
                if current != Self.fired { _ = deadline.compareExchange(expected: current, desired: 0, ordering: .acquiringAndReleasing) }
            }
            return try body()
        }

        /// Whether the watchdog has shut this connection's socket down.
        var hasFired: Bool { deadline.load(ordering: .acquiring) == Self.fired }
    }

    /// The process's watchdog; its thread starts with the first registration.
    static let shared = StatementWatchdog()

    private struct State {
        var cells: [ObjectIdentifier: Cell] = [:]
        var started = false
    }

    private let state = Mutex(State())
    /// How often the thread looks at the deadlines: a call is ended at most this long after its own.
    static let tick: Duration = .milliseconds(200)

    func register(_ cell: Cell) {
        let start = state.withLock { state in
            state.cells[ObjectIdentifier(cell)] = cell
            defer { state.started = true }
            return !state.started
        }
        if start {
            let thread = Thread { [self] in self.loop() }
            thread.name = "push-relay-pg-watchdog"
            thread.start()
        }
    }

    /// Forgets a cell and closes its duplicate descriptor.
    func unregister(_ cell: Cell) {
        state.withLock { state in
            state.cells.removeValue(forKey: ObjectIdentifier(cell))
            if cell.socket >= 0 { close(cell.socket) }
        }
    }

    private func loop() {
        while true {
            Thread.sleep(forTimeInterval: Double(Self.nanoseconds(Self.tick)) / 1e9)
            let now = Self.now()
            state.withLock { state in
                for cell in state.cells.values {
                    let deadline = cell.deadline.load(ordering: .acquiring)
                    guard cell.socket >= 0, deadline != 0, deadline != Cell.fired, deadline <= now else { continue }
                    // Only if the call is still the one that set this deadline.
                    guard cell.deadline.compareExchange(expected: deadline, desired: Cell.fired, ordering: .acquiringAndReleasing).exchanged
                    else { continue }
                    _ = shutdown(cell.socket, Int32(SHUT_RDWR))
                }
            }
        }
    }

    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        guard seconds < 1_000_000_000 else { return 1_000_000_000 * 1_000_000_000 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}
