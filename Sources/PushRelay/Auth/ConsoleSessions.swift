import Crypto
import Foundation
import Postgres

/// Console sign-in sessions in PostgreSQL (`console_sessions`), so any instance behind a load
/// balancer knows them.
///
/// Signing in with an API key opens a session: the browser gets a random token in an `HttpOnly`
/// cookie, the table keeps its SHA-256, the key's id and a CSRF token. A session acts with exactly
/// that key's rights (``Principal``) and ends when the key is revoked (within a second), after
/// ``idleTimeout`` without a request, after ``maxLifetime``, or at sign-out.
///
/// Sessions are checked from memory: the sessions of live keys are part of the keys' in-memory
/// copy (``APIKeyCache``), read again when the generation moves (a key created or revoked, a
/// session opened or ended, on any instance; checked at most once a second). A session's use
/// writes `last_seen_at` at most every ``touchInterval`` (``SessionCache``), so a live stream's
/// heartbeats write nothing; a token no session has (made up, signed out, expired) is refused
/// from the copy, at the cost of a shared, rate-limited generation check, as an unknown key is.
public struct ConsoleSessionStore: Sendable {
    let client: PostgresClient
    /// A session unused this long is over.
    let idleTimeout: Duration
    /// A session is over this long after sign-in, however busy.
    let maxLifetime: Duration
    /// Most sessions one key holds: a sign-in past it closes the key's oldest.
    let maxPerKey: Int
    /// ``maxPerKey`` unless configured (`console.max_sessions_per_key`).
    public static let defaultMaxPerKey = 5
    /// Whose generation tells when the sessions held in memory must be read again.
    let keys: APIKeyStore?
    let cache = SessionCache()

    /// How often a session's use is written (`last_seen_at`) at most: a minute, or half the idle
    /// timeout when that is shorter, so the stored time stays within the idle timeout of the last
    /// use.
    var touchInterval: Duration { min(.seconds(60), idleTimeout / 2) }

    /// The cookie holding the session token over plain HTTP.
    static let cookieName = "pushrelay_session"
    /// The cookie holding the session token over TLS: the `__Host-` prefix makes browsers accept it
    /// only with `Secure`, `Path=/` and no `Domain`, so a sibling host cannot set or shadow it.
    static let secureCookieName = "__Host-" + cookieName

    public init(
        client: PostgresClient,
        keys: APIKeyStore? = nil,
        idleTimeout: Duration = .seconds(30 * 60),
        maxLifetime: Duration = .seconds(12 * 3600),
        maxPerKey: Int = Self.defaultMaxPerKey
    ) {
        self.client = client
        self.keys = keys
        self.idleTimeout = idleTimeout
        self.maxLifetime = maxLifetime
        self.maxPerKey = max(1, maxPerKey)
    }

    /// A live session: who it acts as, and the CSRF token its forms and unsafe requests carry.
    struct Session: Sendable {
        var principal: Principal
        var csrfToken: String
        var keyPrefix: String
        var keyLabel: String?
    }

    /// Opens a session for the key (already verified); returns the cookie's token and the session.
    /// In the same statement the key's sessions past ``maxPerKey`` (the oldest) and its ended ones
    /// are removed: a key cannot hold more sessions however often it signs in, and the clean-up
    /// reads the key's own sessions only (through `console_sessions_by_key`), however many other
    /// keys have.
    func open(key record: APIKeyRecord) async throws -> (token: String, session: Session) {
        let token = Self.randomToken()
        let csrf = Self.randomToken()
        _ = try await client.query(
            """
            WITH opened AS (
                INSERT INTO console_sessions (token_hash, key_id, csrf_token) VALUES ($1, $2, $3) RETURNING token_hash
            )
            DELETE FROM console_sessions s
            WHERE s.key_id = $2 AND s.token_hash NOT IN (SELECT token_hash FROM opened)
              AND (s.last_seen_at < now() - $4::bigint * interval '1 second' OR s.created_at < now() - $5::bigint * interval '1 second'
                OR s.token_hash NOT IN (
                    SELECT token_hash FROM console_sessions WHERE key_id = $2 ORDER BY created_at DESC, token_hash LIMIT $6::int - 1
                ))
            """,
            [
                Self.hash(token), record.id, csrf, Int64(idleTimeout.components.seconds),
                Int64(maxLifetime.components.seconds), maxPerKey,
            ]
        )
        return (
            token,
            Session(principal: record.principal, csrfToken: csrf, keyPrefix: record.prefix, keyLabel: record.label)
        )
    }

    /// The live session of `token`, or `nil` when there is none: unknown, signed out, idle too
    /// long, too old, or its key revoked. From the in-memory copy; a use more than
    /// ``touchInterval`` after the last one written reads the row again and writes `last_seen_at`.
    func session(token: String) async throws -> Session? {
        guard Self.isTokenShaped(token) else { return nil }
        let hash = Self.hash(token)
        if cache.hasEnded(hash) { return nil }
        guard let keys else { return try await read(hash) }
        let (held, generation, complete) = try await keys.session(hash: hash)
        guard let entry = held else {
            // Not in a complete copy checked after this request arrived: no such session.
            if complete {
                cache.ended(hash)
                return nil
            }
            return try await read(hash)
        }
        let now = Date()
        let lastUse = max(entry.lastSeenAt, cache.touched(hash, generation: generation) ?? .distantPast)
        guard now.timeIntervalSince(entry.createdAt) < maxLifetime.timeInterval,
            now.timeIntervalSince(lastUse) < idleTimeout.timeInterval
        else {
            cache.ended(hash)
            return nil
        }
        guard now.timeIntervalSince(lastUse) >= touchInterval.timeInterval else { return entry.session }
        // Time to write the use, which also checks the row itself again.
        guard let session = try await read(hash) else {
            cache.ended(hash)
            return nil
        }
        cache.touch(hash, at: now, generation: generation)
        return session
    }

    /// Reads the session of `hash` from the table and marks it used.
    private func read(_ hash: Data) async throws -> Session? {
        let rows = try await client.query(
            """
            UPDATE console_sessions s SET last_seen_at = now()
            FROM api_keys k
            WHERE s.token_hash = $1 AND k.id = s.key_id AND k.revoked_at IS NULL
              AND s.last_seen_at >= now() - $2::bigint * interval '1 second'
              AND s.created_at >= now() - $3::bigint * interval '1 second'
            RETURNING \(Session.columns)
            """,
            [hash, Int64(idleTimeout.components.seconds), Int64(maxLifetime.components.seconds)]
        ).rows
        return try rows.first.map { try Session(row: $0) }
    }

    /// Ends the session of `token` (sign-out).
    func close(token: String) async throws {
        guard Self.isTokenShaped(token) else { return }
        let hash = Self.hash(token)
        _ = try await client.query("DELETE FROM console_sessions WHERE token_hash = $1", [hash])
        cache.ended(hash)
    }

    /// 32 random bytes, base64url without padding (43 characters).
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(
                of: "=",
                with: ""
            )
    }

    static func isTokenShaped(_ token: String) -> Bool {
        token.utf8.count == 43
            && token.utf8.allSatisfy { InputRules.isAlphanumericASCII($0) || $0 == 0x2D || $0 == 0x5F }
    }

    static func hash(_ token: String) -> Data {
        Data(SHA256.hash(data: Data(token.utf8)))
    }

    /// The value of cookie `name` in a `Cookie` header (`a=1; b=2`), if present.
    static func cookie(_ name: String, in header: String?) -> String? {
        guard let header else { return nil }
        for pair in header.split(separator: ";") {
            let trimmed = pair.trimmingSpacesAndTabs()
            guard let equals = trimmed.firstIndex(of: "=") else { continue }
            if trimmed[..<equals] == name { return String(trimmed[trimmed.index(after: equals)...]) }
        }
        return nil
    }
}

extension APIKeyRecord {
    /// The rights a request made with this key has.
    var principal: Principal { .key(appID: appID, scopes: scopes) }
}

extension Principal {
    /// The rights of an API key of `appID` with `scopes`, or an admin key (`appID` nil).
    static func key(appID: String?, scopes: [String]) -> Principal {
        appID.map { .app(id: $0, scopes: Set(scopes)) } ?? .admin
    }
}

extension ConsoleSessionStore.Session {
    /// What a query selects for ``init(row:)``, first in its row (`s` the session, `k` its key).
    static let columns = "s.csrf_token, k.app_id, k.scopes, k.prefix, k.label"

    /// A session from the first columns of `row`, as ``columns`` selects them.
    init(row: PostgresRow) throws {
        self.init(
            principal: .key(appID: try row.decode(String?.self, at: 1), scopes: try row.decode([String].self, at: 2)),
            csrfToken: try row.decode(String.self, at: 0),
            keyPrefix: try row.decode(String.self, at: 3),
            keyLabel: try row.decode(String?.self, at: 4)
        )
    }
}
