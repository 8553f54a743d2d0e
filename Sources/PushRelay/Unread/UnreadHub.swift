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

    private let events: AsyncStream<PostgresListenerEvent>
    private let heartbeat: Duration
    private let subscribers = Mutex<[UUID: Subscriber]>([:])
    private let versions = Mutex(Versions())

    /// The ETag last served per owner, kept while no change of that owner was announced since it
    /// was read, so an unchanged poll is answered without a query. Announcements come from every
    /// instance (the NOTIFY on ``UnreadChannel``), so the cache is trusted only while the listener
    /// is connected: a lost connection empties it and stops it until the listener is back.
    private struct Versions {
        var listening = false
        /// Counts announcements; a read remembers its ETag only if its owner was not announced
        /// after the read began.
        var generation: UInt64 = 0
        /// When everything was last announced (`*`, or the listener came back).
        var everythingAt: UInt64 = 0
        /// Reads of counts begun and not yet ended.
        var readsInFlight = 0
        /// The generation each owner was last announced at, kept only while reads are in flight:
        /// a read that begins later begins at a generation no entry exceeds, so when the last read
        /// ends the table is emptied, and with none in flight an announcement costs no entry.
        var changedAt: [String: UInt64] = [:]
        var etags: [String: String] = [:]

        mutating func announce(_ keys: some Sequence<Substring>) {
            generation += 1
            guard readsInFlight > 0 || !etags.isEmpty else { return }
            for key in keys {
                let key = String(key)
                if readsInFlight > 0 { changedAt[key] = generation }
                etags[key] = nil
            }
            // Every owner announced while reads are in flight would stay here: past the bound,
            // start over as for `*` (the next poll of each owner queries once).
            if changedAt.count > UnreadHub.maxCachedOwners { announceEverything() }
        }

        mutating func announceEverything() {
            generation += 1
            everythingAt = generation
            changedAt.removeAll(keepingCapacity: true)
            etags.removeAll(keepingCapacity: true)
        }

        mutating func endRead() {
            readsInFlight -= 1
            if readsInFlight == 0 && !changedAt.isEmpty { changedAt.removeAll() }
        }
    }

    /// Most owners whose ETag, or whose last announcement, is kept; past it the cache starts over
    /// (the next poll of each queries once).
    static let maxCachedOwners = 1_000_000

    /// Seconds a client may use an answer of `GET …/unread` before polling again (``UnreadSettings/pollAfter``).
    let pollAfter: Int

    /// `GET …/unread`'s `Cache-Control` value: `private, max-age=` ``pollAfter``.
    let cacheControl: String

    /// - Parameter events: the listener's events on ``UnreadChannel`` (``PostgresListener/events(on:)``).
    init(events: AsyncStream<PostgresListenerEvent>, heartbeat: Duration, pollAfter: Int = 10) {
        self.events = events
        self.heartbeat = heartbeat
        self.pollAfter = pollAfter
        cacheControl = "private, max-age=\(pollAfter)"
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

    /// The ETag of the owner's counts as last served, if no change was announced since.
    func cachedETag(app: String, owner: String) -> String? {
        versions.withLock { $0.listening ? $0.etags[Self.key(app: app, owner: owner)] : nil }
    }

    /// Taken before reading an owner's counts; hand it to ``remember(app:owner:etag:since:)``, or
    /// to ``abandonRead(since:)`` if the read fails. `nil` while announcements cannot be trusted to
    /// arrive.
    func beginRead() -> UInt64? {
        versions.withLock { versions in
            guard versions.listening else { return nil }
            versions.readsInFlight += 1
            return versions.generation
        }
    }

    /// Ends a read begun at `generation` and keeps the ETag of the counts it read, unless the owner
    /// (or everyone) was announced changed since, when the counts read may already be old.
    func remember(app: String, owner: String, etag: String, since generation: UInt64?) {
        guard let generation else { return }
        let key = Self.key(app: app, owner: owner)
        versions.withLock { versions in
            defer { versions.endRead() }
            guard versions.listening, versions.everythingAt <= generation, versions.changedAt[key, default: 0] <= generation else { return }
            if versions.etags.count >= Self.maxCachedOwners { versions.etags.removeAll(keepingCapacity: true) }
            versions.etags[key] = etag
        }
    }

    /// Ends a read begun at `generation` that read nothing.
    func abandonRead(since generation: UInt64?) {
        guard generation != nil else { return }
        versions.withLock { $0.endRead() }
    }

    /// This instance changed the owner's counts itself: forget its ETag at once, before the
    /// announcement comes back.
    func changed(app: String, owner: String) {
        versions.withLock { $0.announce(CollectionOfOne(Substring(Self.key(app: app, owner: owner)))) }
    }

    func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in self.events {
                    switch event {
                    case .listening:
                        // Changes may have been missed while the connection was away.
                        self.versions.withLock { versions in
                            versions.listening = true
                            versions.announceEverything()
                        }
                        self.signalAll(.changed)
                    case .lost:
                        self.versions.withLock { versions in
                            versions.listening = false
                            versions.announceEverything()
                        }
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
            versions.withLock { $0.announceEverything() }
            signalAll(.changed)
            return
        }
        let keys = payload.split(separator: "\n")
        versions.withLock { $0.announce(keys) }
        subscribers.withLock { table in
            guard !table.isEmpty else { return }
            let changed = Set(keys)
            for subscriber in table.values where changed.contains(Substring(subscriber.key)) { subscriber.continuation.yield(.changed) }
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
/// - `poll_after_seconds` (int, default 10): see ``pollAfter``.
public struct UnreadSettings: Sendable {
    public var heartbeat: Duration

    /// `poll_after_seconds` (int, default 10, 0 to 86400): the `max-age` of `GET …/unread`'s
    /// `Cache-Control`, how long a client may use an answer before polling again.
    public var pollAfter: Int

    public init(config: ConfigReader) {
        heartbeat = .seconds(max(1, config.int(forKey: "heartbeat_seconds", default: 15)))
        pollAfter = min(max(0, config.int(forKey: "poll_after_seconds", default: 10)), 86_400)
    }
}
