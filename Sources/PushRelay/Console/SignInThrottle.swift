import Foundation
import Synchronization

/// Paces console sign-ins on this instance, per API key and per client address: each has a bucket
/// of `limit` attempts that refills at `limit` a minute, and every attempt takes one from both,
/// whether it succeeds or not. An attempt that finds either empty is refused with the seconds
/// until both have one again (the console answers 429 with `Retry-After`), and takes nothing.
///
/// A key cannot open sessions faster than its limit, nor one address try keys faster than its
/// own. The buckets are a ``FairCache`` bounded in bytes, keys and addresses in groups of their
/// own: a flood of addresses evicts the least recently used addresses' buckets, never a key's.
/// Each instance paces the sign-ins it receives (behind a load balancer, a client's limit is per
/// instance).
final class SignInThrottle: Sendable {
    struct Bucket: Sendable {
        var tokens: Double
        var at: ContinuousClock.Instant
    }

    let perKey: Int
    let perAddress: Int
    private let clock: RelayClock
    private let buckets: Mutex<FairCache<String, Bucket>>

    init(perKey: Int, perAddress: Int, clock: RelayClock = .system, maxBytes: Int = 1 << 20) {
        self.perKey = max(1, perKey)
        self.perAddress = max(1, perAddress)
        self.clock = clock
        buckets = Mutex(FairCache(maxBytes: maxBytes))
    }

    /// Counts an attempt by the key with prefix `key` (nil: not an API key) from `address`; `nil`
    /// when it may go on, else the whole seconds to wait.
    func admit(key: String?, address: String) -> Int? {
        let now = clock.now()
        var checks = [(group: "address", id: "address " + address, limit: perAddress)]
        if let key { checks.append((group: "key", id: "key " + key, limit: perKey)) }
        return buckets.withLock { cache in
            var refilled: [Bucket] = []
            var wait = 0.0
            for check in checks {
                var bucket = cache.value(for: check.id) ?? Bucket(tokens: Double(check.limit), at: now)
                let rate = Double(check.limit) / 60
                bucket.tokens = min(Double(check.limit), bucket.tokens + (now - bucket.at).timeInterval * rate)
                bucket.at = now
                if bucket.tokens < 1 { wait = max(wait, (1 - bucket.tokens) / rate) }
                refilled.append(bucket)
            }
            let admitted = wait == 0
            for (check, bucket) in zip(checks, refilled) {
                var kept = bucket
                if admitted { kept.tokens -= 1 }
                cache.insert(kept, for: check.id, group: check.group, bytes: check.id.utf8.count + 160)
            }
            return admitted ? nil : max(1, Int((wait - 1e-6).rounded(.up)))  // 10.000000001 s is 10
        }
    }
}
