import Configuration
import Crypto
import Foundation
import Synchronization

extension Authenticator {
    /// User tokens whose signature and claims were already checked, with their subject and
    /// expiry: a mobile app sends the same token with every poll, and checking it again (JSON
    /// decoding, HMAC) cost more than answering an unchanged poll. The expiry is still checked on
    /// every use.
    ///
    /// Every app holds its own key, so any app can mint tokens: the cache is keyed by a SHA-256
    /// digest of app and token (a token's length costs nothing here), bounded in bytes
    /// (`auth.user_token_cache_mb`), and shared fairly between apps (``FairCache``): an app
    /// minting tokens without end evicts its own least recently used ones.
    ///
    /// Each ``forget()`` starts a new key epoch. A check reads the epoch before it reads the app's
    /// keys, and its result is kept only if the epoch is still the same when it ends: a token
    /// checked against keys a reload has since replaced is not cached into the new epoch.
    final class VerifiedUserTokens: Sendable {
        struct Entry {
            var subject: String
            var expires: Date
        }

        private struct Table {
            var epoch: UInt64 = 0
            var cache: FairCache<SHA256Digest, Entry>
        }
        private let table: Mutex<Table>

        init(maxBytes: Int) {
            table = Mutex(Table(cache: FairCache(maxBytes: maxBytes)))
        }

        /// What one kept token is charged: its digest, subject and expiry, and the cache's own
        /// bookkeeping per entry (dictionary slot, list links, string header).
        static func entryBytes(subject: String) -> Int { 32 + subject.utf8.count + 8 + 160 }

        /// On every poll with a user token: the text's bytes are hashed in place, not copied.
        static func key(app: String, token: String) -> SHA256Digest {
            var hash = SHA256()
            var (app, token) = (app, token)
            app.withUTF8 { hash.update(bufferPointer: UnsafeRawBufferPointer($0)) }
            hash.update(data: [0])
            token.withUTF8 { hash.update(bufferPointer: UnsafeRawBufferPointer($0)) }
            return hash.finalize()
        }

        func subject(app: String, token: String, now: Date) -> String? {
            let key = Self.key(app: app, token: token)
            return table.withLock { table in
                guard let entry = table.cache.value(for: key) else { return nil }
                return entry.expires > now ? entry.subject : nil
            }
        }

        /// The key epoch now: read it before reading the keys a token is checked against.
        var epoch: UInt64 { table.withLock { $0.epoch } }

        /// Bytes the kept tokens are charged with, in all and for `app`.
        var bytes: Int { table.withLock { $0.cache.bytes } }
        func bytes(of app: String) -> Int { table.withLock { $0.cache.bytes(of: app) } }

        /// Forgets every token and starts a new epoch: after a reload, a token signed with a key
        /// no longer configured must not stay accepted.
        func forget() {
            table.withLock { table in
                table.epoch &+= 1
                table.cache.removeAll()
            }
        }

        /// Keeps a checked token, unless the keys changed since `epoch` was read (then `false`).
        @discardableResult
        func remember(app: String, token: String, subject: String, expires: Date, epoch: UInt64) -> Bool {
            let key = Self.key(app: app, token: token)
            return table.withLock { table in
                guard table.epoch == epoch else { return false }
                table.cache.insert(
                    Entry(subject: subject, expires: expires),
                    for: key,
                    group: app,
                    bytes: Self.entryBytes(subject: subject)
                )
                return true
            }
        }
    }
}

/// Authentication's own settings (the `auth` section).
struct AuthSettings: Sendable {
    /// Bytes the cache of verified user tokens may hold, shared fairly between apps
    /// (`auth.user_token_cache_mb`, 1-4096 MiB).
    var userTokenCacheBytes = 32 << 20

    init() {}
}
