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
        var app: String
        var credential: String
        var continuation: AsyncStream<Signal>.Continuation
    }

    /// The live streams, and how many each owner, app and credential has open.
    private struct Streams {
        var subscribers: [UUID: Subscriber] = [:]
        var perOwner: [String: Int] = [:]
        var perApp: [String: Int] = [:]
        var perCredential: [String: Int] = [:]
    }

    private let events: AsyncStream<PostgresListenerEvent>
    private let heartbeat: Duration
    private let streams = Mutex(Streams())
    private let versions: Mutex<Versions>
    /// Most live streams open at once on this instance, and per owner.
    let maxStreams: Int
    let maxStreamsPerOwner: Int
    /// Most live streams one app, and one credential (an API key, a console session, a user
    /// token), may hold on this instance: their shares, so no app or key takes every place.
    let maxStreamsPerApp: Int
    let maxStreamsPerCredential: Int
    /// How long a live stream lasts at most (``UnreadSettings/streamLifetime``).
    let streamLifetime: Duration
    /// Times the heartbeats and the streams' lifetimes.
    let clock: RelayClock

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
        /// The ETags by owner key, each charged ``UnreadHub/entryBytes(_:_:)`` (owner ids may be up
        /// to 1 KiB each, so a bound in entries alone would not bound memory) and shared fairly
        /// between apps: an app polling made-up owners evicts its own least recently used ETags,
        /// not another app's.
        var etags: FairCache<String, String>
        /// What `changedAt` holds, in bytes.
        var changedBytes = 0
        let maxBytes: Int

        init(maxBytes: Int) {
            self.maxBytes = maxBytes
            etags = FairCache(maxBytes: maxBytes)
        }

        mutating func announce(_ keys: () -> [Substring]) {
            generation += 1
            guard readsInFlight > 0 || etags.count > 0 else { return }
            for key in keys() {
                let key = String(key)
                if readsInFlight > 0, changedAt.updateValue(generation, forKey: key) == nil {
                    changedBytes += UnreadHub.entryBytes(key, 8)
                }
                etags.removeValue(for: key)
            }
            // Every owner announced while reads are in flight would stay here: past the bound,
            // start over as for `*` (the next poll of each owner queries once).
            if changedBytes > maxBytes { announceEverything() }
        }

        mutating func announceEverything() {
            generation += 1
            everythingAt = generation
            changedAt.removeAll(keepingCapacity: false)
            etags.removeAll()
            changedBytes = 0
        }

        mutating func remember(_ key: String, app: String, _ etag: String) {
            etags.insert(etag, for: key, group: app, bytes: UnreadHub.entryBytes(key, etag.utf8.count))
        }

        mutating func endRead() {
            readsInFlight -= 1
            if readsInFlight == 0 && !changedAt.isEmpty {
                changedAt.removeAll()
                changedBytes = 0
            }
        }
    }

    /// What one cache entry costs: its key and value and, per entry, the dictionary's slot and
    /// the strings' storage headers and the cache's list links (about this on 64-bit Linux).
    static func entryBytes(_ key: String, _ valueBytes: Int) -> Int { key.utf8.count + valueBytes + 160 }

    /// Bytes of the ETag cache (shared fairly between apps: past it, the app holding the most
    /// loses its least recently used ETags), and apart of the announcements kept while reads are
    /// in flight (past it they start over, as for `*`).
    let maxCacheBytes: Int

    /// Bytes the ETag cache may hold unless configured (`unread.etag_cache_mb`).
    static let defaultCacheBytes = 64 << 20

    /// Seconds a client may use an answer of `GET …/unread` before polling again (``UnreadSettings/pollAfter``).
    let pollAfter: Int

    /// `GET …/unread`'s `Cache-Control` value: `private, max-age=` ``pollAfter``.
    let cacheControl: String

    /// - Parameter events: the listener's events on ``UnreadChannel`` (``PostgresListener/events(on:)``).
    init(
        events: AsyncStream<PostgresListenerEvent>,
        settings: UnreadSettings = UnreadSettings(),
        clock: RelayClock = .system
    ) {
        self.clock = clock
        self.streamLifetime = settings.streamLifetime
        self.events = events
        self.heartbeat = settings.heartbeat
        self.pollAfter = settings.pollAfter
        self.maxStreams = max(0, settings.maxStreams)
        self.maxStreamsPerOwner = max(1, settings.maxStreamsPerOwner)
        self.maxStreamsPerApp = max(1, settings.maxStreamsPerApp)
        self.maxStreamsPerCredential = max(1, settings.maxStreamsPerCredential)
        self.maxCacheBytes = max(1 << 16, settings.cacheBytes)
        versions = Mutex(Versions(maxBytes: self.maxCacheBytes))
        cacheControl = "private, max-age=\(settings.pollAfter)"
    }

    private static func key(app: String, owner: String) -> String { app + " " + owner }

    /// Why a stream was not opened.
    enum Refusal: Error {
        /// The owner has ``maxStreamsPerOwner`` open.
        case owner
        /// The credential has ``maxStreamsPerCredential`` open.
        case credential
        /// The app has ``maxStreamsPerApp`` open.
        case app
        /// This instance has ``maxStreams`` open.
        case instance
    }

    /// A stream of signals for one owner, counted against the owner's, the credential's, the
    /// app's and the instance's limits until the returned ``Subscription`` is unsubscribed or
    /// released. `credential` names who opened it (``UnreadController`` passes a digest of the
    /// credential presented).
    func subscribe(app: String, owner: String, credential: String = "") throws(Refusal) -> Subscription {
        let id = UUID()
        let key = Self.key(app: app, owner: owner)
        let (stream, continuation) = AsyncStream.makeStream(of: Signal.self, bufferingPolicy: .bufferingNewest(1))
        let refusal = streams.withLock { streams -> Refusal? in
            if streams.perOwner[key, default: 0] >= maxStreamsPerOwner { return .owner }
            if streams.perCredential[credential, default: 0] >= maxStreamsPerCredential { return .credential }
            if streams.perApp[app, default: 0] >= maxStreamsPerApp { return .app }
            if streams.subscribers.count >= maxStreams { return .instance }
            streams.perOwner[key, default: 0] += 1
            streams.perCredential[credential, default: 0] += 1
            streams.perApp[app, default: 0] += 1
            streams.subscribers[id] = Subscriber(key: key, app: app, credential: credential, continuation: continuation)
            return nil
        }
        if let refusal { throw refusal }
        return Subscription(hub: self, id: id, signals: stream)
    }

    /// A live stream's place: released (and its signals finished) by ``unsubscribe(_:)`` or, at
    /// the latest, when the last reference to it goes, so a response that is never written
    /// cannot keep an owner's place.
    final class Subscription: Sendable {
        let hub: UnreadHub
        let id: UUID
        let signals: AsyncStream<Signal>

        init(hub: UnreadHub, id: UUID, signals: AsyncStream<Signal>) {
            self.hub = hub
            self.id = id
            self.signals = signals
        }

        deinit { hub.unsubscribe(id) }
    }

    /// Ends a stream (its consumer's loop finishes).
    func unsubscribe(_ id: UUID) {
        let subscriber = streams.withLock { streams -> Subscriber? in
            guard let subscriber = streams.subscribers.removeValue(forKey: id) else { return nil }
            let left = streams.perOwner[subscriber.key, default: 1] - 1
            streams.perOwner[subscriber.key] = left > 0 ? left : nil
            let appLeft = streams.perApp[subscriber.app, default: 1] - 1
            streams.perApp[subscriber.app] = appLeft > 0 ? appLeft : nil
            let credentialLeft = streams.perCredential[subscriber.credential, default: 1] - 1
            streams.perCredential[subscriber.credential] = credentialLeft > 0 ? credentialLeft : nil
            return subscriber
        }
        subscriber?.continuation.finish()
    }

    var subscriberCount: Int { streams.withLock { $0.subscribers.count } }

    /// Bytes the ETag cache and the announcements kept for reads in flight hold now.
    var cachedBytes: Int { versions.withLock { $0.etags.bytes + $0.changedBytes } }

    /// Bytes of the ETag cache that `app`'s owners hold.
    func cachedBytes(app: String) -> Int { versions.withLock { $0.etags.bytes(of: app) } }

    /// The ETag of the owner's counts as last served, if no change was announced since.
    func cachedETag(app: String, owner: String) -> String? {
        versions.withLock { $0.listening ? $0.etags.value(for: Self.key(app: app, owner: owner)) : nil }
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
            guard versions.listening, versions.everythingAt <= generation,
                versions.changedAt[key, default: 0] <= generation
            else { return }
            versions.remember(key, app: app, etag)
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
        versions.withLock { $0.announce { [Substring(Self.key(app: app, owner: owner))] } }
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
                    try? await self.clock.sleep(for: self.heartbeat)
                    self.signalAll(.heartbeat)
                }
            }
            try? await gracefulShutdown()
            group.cancelAll()
        }
        let remaining = streams.withLock { streams in
            defer { streams = Streams() }
            return Array(streams.subscribers.values)
        }
        for subscriber in remaining { subscriber.continuation.finish() }
    }

    private func signal(payload: String) {
        if payload == "*" {
            versions.withLock { $0.announceEverything() }
            signalAll(.changed)
            return
        }
        // Every webhook's commit sends one of these: its lines are read only when some poll or
        // stream here can use them.
        var keys: [Substring]?
        func lines() -> [Substring] {
            if let keys { return keys }
            let split = Self.lines(of: payload)
            keys = split
            return split
        }
        versions.withLock { $0.announce(lines) }
        streams.withLock { streams in
            guard !streams.subscribers.isEmpty else { return }
            let changed = Set(lines())
            for subscriber in streams.subscribers.values where changed.contains(Substring(subscriber.key)) {
                subscriber.continuation.yield(.changed)
            }
        }
    }

    /// The non-empty lines of a NOTIFY payload, split at each newline byte.
    static func lines(of payload: String) -> [Substring] {
        payload.utf8.split(separator: UInt8(ascii: "\n")).map { Substring($0) }
    }

    private func signalAll(_ signal: Signal) {
        streams.withLock { streams in
            for subscriber in streams.subscribers.values { subscriber.continuation.yield(signal) }
        }
    }
}
