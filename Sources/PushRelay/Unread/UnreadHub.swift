import Configuration
import Foundation
import Logging
import Postgres
import ServiceLifecycle
import Synchronization

/// Fans changes of unread counts out to the live streams of this instance.
///
/// Intake and read endpoints on any instance announce changed owners on ``UnreadChannel`` (the
/// NOTIFY is sent at commit); this hub listens on a connection of its own and signals the
/// streams of those owners, which then re-read their counts. It also sends the streams a
/// heartbeat signal every `heartbeat`.
final class UnreadHub: Service, Sendable {
    enum Signal: Sendable {
        case changed
        case heartbeat
    }

    private struct Subscriber {
        var key: String
        var continuation: AsyncStream<Signal>.Continuation
    }

    private let listener: PostgresListener
    private let heartbeat: Duration
    private let subscribers = Mutex<[UUID: Subscriber]>([:])

    init(listener: PostgresListener, heartbeat: Duration) {
        self.listener = listener
        self.heartbeat = heartbeat
    }

    private static func key(app: String, owner: String) -> String { app + " " + owner }

    /// A stream of signals for one owner; end it with ``unsubscribe(_:)``.
    func subscribe(app: String, owner: String) -> (id: UUID, signals: AsyncStream<Signal>) {
        let id = UUID()
        let (stream, continuation) = AsyncStream.makeStream(of: Signal.self, bufferingPolicy: .bufferingNewest(1))
        subscribers.withLock { $0[id] = Subscriber(key: Self.key(app: app, owner: owner), continuation: continuation) }
        return (id, stream)
    }

    /// Ends a stream (its consumer's loop finishes).
    func unsubscribe(_ id: UUID) {
        subscribers.withLock { $0.removeValue(forKey: id) }?.continuation.finish()
    }

    var subscriberCount: Int { subscribers.withLock { $0.count } }

    func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in self.listener.events {
                    switch event {
                    case .listening:
                        // Changes may have been missed while the connection was away.
                        self.signalAll(.changed)
                    case .notification(let notification):
                        self.signal(payload: notification.payload)
                    }
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: self.heartbeat)
                    self.signalAll(.heartbeat)
                }
            }
            try? await gracefulShutdown()
            group.cancelAll()
        }
        let remaining = subscribers.withLock { table in
            defer { table.removeAll() }
            return Array(table.values)
        }
        for subscriber in remaining { subscriber.continuation.finish() }
    }

    private func signal(payload: String) {
        if payload == "*" {
            signalAll(.changed)
            return
        }
        let keys = Set(payload.split(separator: "\n").map(String.init))
        subscribers.withLock { table in
            for subscriber in table.values where keys.contains(subscriber.key) { subscriber.continuation.yield(.changed) }
        }
    }

    private func signalAll(_ signal: Signal) {
        subscribers.withLock { table in
            for subscriber in table.values { subscriber.continuation.yield(signal) }
        }
    }
}

/// The channel on which changes of unread counts are announced. The payload lists the changed
/// owners, one `app owner` per line, or is `*` when the list would not fit (then every listener
/// re-reads).
enum UnreadChannel {
    static let name = "push_relay_unread"
}

/// The unread live stream (`unread.*`).
///
/// Keys, read from a reader scoped to `unread`:
/// - `heartbeat_seconds` (int, default 15, at least 1): how often an idle live stream sends a comment line.
public struct UnreadSettings: Sendable {
    public var heartbeat: Duration

    public init(config: ConfigReader) {
        heartbeat = .seconds(max(1, config.int(forKey: "heartbeat_seconds", default: 15)))
    }
}
