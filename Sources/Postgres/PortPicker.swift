// Listening ports for the servers a process starts (its embedded PostgreSQL, the relays and
// clusters of a test run), picked where no outgoing connection takes them and never twice.
import Foundation
import Synchronization

/// Hands out TCP ports outside the kernel's ephemeral range, each once per process.
///
/// The walk starts at a random port of the range, so two processes that pick at once rarely try
/// the same ports; a port this process handed out is never handed out again, so two servers it
/// starts never race for one.
final class PortPicker: Sendable {
    static let shared = PortPicker(range: PortPicker.listeningRange())

    let range: ClosedRange<Int>
    private let state: Mutex<(next: Int, given: Set<Int>)>

    init(range: ClosedRange<Int>) {
        self.range = range
        state = Mutex((Int.random(in: range), []))
    }

    /// The next port of the range that this process has not handed out and `isFree` accepts.
    func next(isFree: (Int) -> Bool) throws -> Int {
        try state.withLock { state in
            for _ in 0..<range.count {
                let port = state.next
                state.next = port == range.upperBound ? range.lowerBound : port + 1
                if state.given.contains(port) || !isFree(port) { continue }
                state.given.insert(port)
                return port
            }
            throw PostgresError(code: .embeddedServer, message: "no free port in \(range.lowerBound)-\(range.upperBound)")
        }
    }

    /// Ports the kernel does not give outgoing connections: below the ephemeral range
    /// (`/proc/sys/net/ipv4/ip_local_port_range`, 32768-60999 by default) and above 10000, or
    /// above the range when it starts too low to leave room below.
    static func listeningRange(
        ephemeral: String? = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
    )
        -> ClosedRange<Int>
    {
        let bounds = (ephemeral ?? "").split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard bounds.count == 2, bounds[0] <= bounds[1] else { return 10000...32767 }
        if bounds[0] > 11000 { return 10000...(bounds[0] - 1) }
        if bounds[1] < 64535 { return (bounds[1] + 1)...65535 }
        return 10000...32767  // the whole space is ephemeral: no port is safe; keep to the default's
    }
}
