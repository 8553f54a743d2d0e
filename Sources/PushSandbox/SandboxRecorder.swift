import Foundation
import Synchronization

/// One request the sandbox received.
public struct SandboxRequest: Sendable, Codable, Hashable {
    /// `apns`, `fcm`, `oauth`, `zendesk` or `sink`.
    public var service: String
    public var path: String
    /// Header names lower-cased.
    public var headers: [String: String]
    public var body: String
    /// The status the sandbox answered with.
    public var status: Int
    /// The provider's reason (`BadDeviceToken`, `UNREGISTERED`…), when it answered with an error.
    public var reason: String?
    public var receivedAt: Date

    enum CodingKeys: String, CodingKey {
        case service, path, headers, body, status, reason
        case receivedAt = "received_at"
    }
}

/// What the sandbox should answer for one device token instead of success.
public struct SandboxBehaviour: Sendable, Codable, Hashable {
    /// The HTTP status to answer with (0 keeps success but may still delay).
    public var status: Int
    /// The provider reason to put in the body.
    public var reason: String?
    /// Seconds for a `Retry-After` header.
    public var retryAfter: Int?
    /// A `Retry-After` header sent as written (an HTTP-date, junk), instead of `retryAfter`.
    public var retryAfterText: String?
    /// Milliseconds to wait before answering.
    public var delayMilliseconds: Int?
    /// How many requests get this answer; `nil` for all of them.
    public var times: Int?
    /// For an APNs 410: the `timestamp` (milliseconds since 1970) at which the token stopped being
    /// valid; the moment of the answer when unset.
    public var invalidSinceMilliseconds: Int64?
    /// The APNs environment the token belongs to (`production` or `sandbox`): requests to the other
    /// environment's path get 400 `BadDeviceToken`, as Apple's other host would answer, whatever
    /// `times` says.
    public var environment: String?

    public init(
        status: Int,
        reason: String? = nil,
        retryAfter: Int? = nil,
        delayMilliseconds: Int? = nil,
        times: Int? = nil,
        invalidSinceMilliseconds: Int64? = nil,
        environment: String? = nil,
        retryAfterText: String? = nil
    ) {
        self.status = status
        self.reason = reason
        self.retryAfter = retryAfter
        self.retryAfterText = retryAfterText
        self.delayMilliseconds = delayMilliseconds
        self.times = times
        self.invalidSinceMilliseconds = invalidSinceMilliseconds
        self.environment = environment
    }

    /// For the plain endpoints (Zendesk, events): waits `delay_ms`, then the error to answer with
    /// (`nil` when the behaviour keeps success), its reason (`defaultReason` when none was set) and
    /// a `Retry-After` header when one was set.
    func failure(defaultReason: String, state: SandboxState) async -> (status: Int, reason: String, headers: [(String, String)])? {
        if let delayMilliseconds { await state.delay(milliseconds: delayMilliseconds) }
        guard status != 0 && status != 200 else { return nil }
        return (status, reason ?? defaultReason, retryAfterHeader.map { [("retry-after", $0)] } ?? [])
    }

    /// The `Retry-After` header to answer with, if any.
    var retryAfterHeader: String? { retryAfterText ?? retryAfter.map { String($0) } }

    enum CodingKeys: String, CodingKey {
        case status, reason, times, environment
        case retryAfter = "retry_after"
        case retryAfterText = "retry_after_text"
        case delayMilliseconds = "delay_ms"
        case invalidSinceMilliseconds = "invalid_since_ms"
    }
}

/// The sandbox's memory: what it received and the behaviours it was told to show.
public final class SandboxState: Sendable {
    private let received = Mutex<[SandboxRequest]>([])
    private let behaviours = Mutex<[String: SandboxBehaviour]>([:])
    /// Requests to `/sink` are only counted, so the sender benchmark measures the client.
    private let sinkCount = Atomic<Int>(0)
    /// The connections `/sink` requests came on (their numbers; see ``SandboxHTTPRequest``).
    private let sinkConnectionNumbers = Mutex<Set<Int>>([])
    private let recording: Bool
    private let observer: (@Sendable (SandboxRequest) -> Void)?

    /// - Parameters:
    ///   - recording: keep every request for ``requests(service:)``; a long benchmark turns this off.
    ///   - observer: called with each request as it is answered (from the server's threads).
    public init(recording: Bool = true, observer: (@Sendable (SandboxRequest) -> Void)? = nil) {
        self.recording = recording
        self.observer = observer
    }

    /// Everything received so far (optionally of one service), oldest first.
    public func requests(service: String? = nil) -> [SandboxRequest] {
        received.withLock { list in service.map { name in list.filter { $0.service == name } } ?? list }
    }

    public func clear() { received.withLock { $0.removeAll() } }

    private let credentials = Mutex<Set<String>>([])

    /// Every credential presented to the sandbox: APNs provider tokens, OAuth assertions, FCM
    /// access tokens, Zendesk Basic credentials. Recorded requests leave them out; tests use this
    /// list to check that none of them reaches a log.
    public func presentedCredentials() -> Set<String> { credentials.withLock { $0 } }

    func presented(_ credential: String) {
        guard !credential.isEmpty else { return }
        credentials.withLock { _ = $0.insert(credential) }
    }

    func record(_ request: SandboxRequest) {
        observer?(request)
        if recording { received.withLock { $0.append(request) } }
    }

    /// Requests held by a behaviour's `delay_ms` now, and the most held at once so far.
    private let held = Mutex<(now: Int, peak: Int, released: Bool)>((0, 0, false))

    /// Holds a request for `milliseconds`, or until ``releaseDelays()``.
    func delay(milliseconds: Int) async {
        held.withLock { held in
            held.now += 1
            held.peak = max(held.peak, held.now)
        }
        defer { held.withLock { $0.now -= 1 } }
        let until = ContinuousClock.now + .milliseconds(milliseconds)
        while ContinuousClock.now < until, !Task.isCancelled, !held.withLock({ $0.released }) {
            try? await Task.sleep(for: min(.milliseconds(10), until - .now))
        }
    }

    /// Ends every delay now, and each later one at once: a test that held requests (a long
    /// `delay_ms`, so that what it checks cannot depend on the machine's speed) lets them go.
    public func releaseDelays() { held.withLock { $0.released = true } }

    /// How many requests a delay holds now.
    public var heldNow: Int { held.withLock { $0.now } }

    /// The most requests delays held at once.
    public var heldPeak: Int { held.withLock { $0.peak } }

    /// Sets how the sandbox answers requests for `token`.
    public func setBehaviour(_ behaviour: SandboxBehaviour?, for token: String) {
        behaviours.withLock { $0[token] = behaviour }
    }

    /// The APNs environment a behaviour ties `token` to, without counting the behaviour down.
    func environment(of token: String) -> String? {
        behaviours.withLock { $0[token]?.environment }
    }

    /// The behaviour to apply now for `token`, counting it down.
    func takeBehaviour(for token: String) -> SandboxBehaviour? {
        behaviours.withLock { table in
            guard var behaviour = table[token] else { return nil }
            if let times = behaviour.times {
                if times <= 1 {
                    table[token] = nil
                } else {
                    behaviour.times = times - 1
                    table[token] = behaviour
                }
            }
            return behaviour
        }
    }

    func countSink(connection: Int) {
        sinkCount.add(1, ordering: .relaxed)
        sinkConnectionNumbers.withLock { _ = $0.insert(connection) }
    }

    /// Per APNs key id: every provider token seen, when the newest one first came, and whether it
    /// was answered ExpiredProviderToken since.
    private let providerTokens = Mutex<[String: (seen: Set<String>, newestAt: Date, expired: Bool)]>([:])

    /// Apple's rule: a key's provider token may change at most every 20 minutes, or the new one is
    /// refused (429 TooManyProviderTokenUpdates). A token already seen, the first token of a key,
    /// and a new one after the newest was reported expired are admitted.
    func admitProviderToken(_ jwt: String, keyID: String, now: Date = Date()) -> Bool {
        providerTokens.withLock { table in
            guard var entry = table[keyID] else {
                table[keyID] = ([jwt], now, false)
                return true
            }
            if entry.seen.contains(jwt) { return true }
            guard entry.expired || now.timeIntervalSince(entry.newestAt) >= 20 * 60 else { return false }
            entry.seen.insert(jwt)
            entry.newestAt = now
            entry.expired = false
            table[keyID] = entry
            return true
        }
    }

    /// The sandbox answered ExpiredProviderToken for a token of `keyID`: a new one is welcome.
    func providerTokenExpired(keyID: String) {
        providerTokens.withLock { $0[keyID]?.expired = true }
    }

    /// The distinct provider tokens admitted for an APNs key id.
    public func providerTokenCount(keyID: String) -> Int {
        providerTokens.withLock { $0[keyID]?.seen.count ?? 0 }
    }

    /// Requests answered by `/sink`.
    public var sinkRequests: Int { sinkCount.load(ordering: .relaxed) }

    /// How many TCP connections `/sink` requests came on.
    public var sinkConnections: Int { sinkConnectionNumbers.withLock { $0.count } }
}
