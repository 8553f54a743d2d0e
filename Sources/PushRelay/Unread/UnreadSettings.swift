/// The unread live stream (`unread.*`); the initialiser's arguments are the defaults, and
/// `UnreadSettings+ConfigReader.swift` reads the keys.
///
/// Keys, read from a reader scoped to `unread`:
/// - `heartbeat_seconds` (int, default 15, at least 1): how often an idle live stream sends a comment line.
/// - `poll_after_seconds` (int, default 10): see ``pollAfter``.
/// - `max_streams_per_owner` (int, default 4): live streams one owner (user) may hold open on an
///   instance; one more is answered 429 with `Retry-After`.
/// - `max_streams` (int, default 1024): live streams open at once on an instance, all owners.
/// - `max_streams_per_app` (int, default three quarters of `max_streams`): live streams one app
///   may hold on an instance, so another app always finds a place.
/// - `max_streams_per_credential` (int, default a quarter of `max_streams`): live streams one
///   credential (an API key, a console session, a user token) may hold on an instance: an app
///   key may name any owner, so the per-owner limit alone does not bound it.
/// - `stream_max_seconds` (int, default 3600): a live stream ends after this long (the client's
///   EventSource reconnects, authenticating again); it ends earlier when its credential expires
///   or is revoked, noticed at the next heartbeat.
/// - `etag_cache_mb` (int, default 64): memory for the ETags of unchanged polls.
public struct UnreadSettings: Sendable {
    public var heartbeat: Duration
    public var maxStreamsPerOwner: Int
    public var maxStreams: Int
    public var maxStreamsPerApp: Int
    public var maxStreamsPerCredential: Int

    /// Three quarters of the instance's streams, at least one.
    static func defaultAppShare(of maxStreams: Int) -> Int { max(1, maxStreams * 3 / 4) }
    /// A quarter of the instance's streams, at least one.
    static func defaultCredentialShare(of maxStreams: Int) -> Int { max(1, maxStreams / 4) }
    public var streamLifetime: Duration
    public var cacheBytes: Int

    /// `poll_after_seconds` (int, default 10, 0 to 86400): the `max-age` of `GET …/unread`'s
    /// `Cache-Control`, how long a client may use an answer before polling again.
    public var pollAfter: Int

    /// The defaults, or the values given; the two shares default to their parts of `maxStreams`.
    public init(
        heartbeat: Duration = .seconds(15),
        pollAfter: Int = 10,
        maxStreamsPerOwner: Int = 4,
        maxStreams: Int = 1024,
        maxStreamsPerApp: Int? = nil,
        maxStreamsPerCredential: Int? = nil,
        streamLifetime: Duration = .seconds(3600),
        cacheBytes: Int = 64 << 20
    ) {
        self.heartbeat = heartbeat
        self.pollAfter = pollAfter
        self.maxStreamsPerOwner = maxStreamsPerOwner
        self.maxStreams = maxStreams
        self.maxStreamsPerApp = maxStreamsPerApp ?? Self.defaultAppShare(of: maxStreams)
        self.maxStreamsPerCredential = maxStreamsPerCredential ?? Self.defaultCredentialShare(of: maxStreams)
        self.streamLifetime = streamLifetime
        self.cacheBytes = cacheBytes
    }
}
