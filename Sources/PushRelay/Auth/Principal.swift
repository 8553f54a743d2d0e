import Foundation
import HTTPTypes
import Hummingbird
import JWTKit
import Synchronization

/// Who is calling, as established from the `Authorization: Bearer …` header.
public enum Principal: Sendable, Hashable {
    /// An admin key: may act on every app.
    case admin
    /// An app server's key, limited to one app and its scopes.
    case app(id: String, scopes: Set<String>)
    /// A mobile client holding a user JWT of one app.
    case user(app: String, userID: String)
}

/// Claims PushRelay reads from a user JWT (HS256, signed by the app's backend). The expiry is
/// checked against the authenticator's clock after the signature (``Authenticator``).
struct UserTokenClaims: JWTPayload {
    var sub: SubjectClaim
    var exp: ExpirationClaim

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// Turns the bearer credential into a ``Principal``: API keys from the database, user JWTs with
/// the HS256 key of the app named in the URL.
public struct Authenticator: Sendable {
    let keys: APIKeyStore
    let apps: AppDirectory
    /// Console sessions: a request without an `Authorization` header but with the console's
    /// session cookie acts as the key the session was opened with.
    let sessions: ConsoleSessionStore?
    let verifiedUserTokens: VerifiedUserTokens
    /// The date user tokens' expiry is checked against.
    let clock: RelayClock

    public init(keys: APIKeyStore, apps: AppDirectory, sessions: ConsoleSessionStore? = nil) {
        self.init(keys: keys, apps: apps, sessions: sessions, clock: .system)
    }

    init(
        keys: APIKeyStore,
        apps: AppDirectory,
        sessions: ConsoleSessionStore?,
        clock: RelayClock,
        settings: AuthSettings = AuthSettings()
    ) {
        self.keys = keys
        self.apps = apps
        self.sessions = sessions
        self.clock = clock
        self.verifiedUserTokens = VerifiedUserTokens(maxBytes: settings.userTokenCacheBytes)
    }

    /// The longest user token accepted, in bytes: a token carries a subject and two dates, and one
    /// longer than this is refused (401) before it is hashed, decoded or checked.
    static let maxUserTokenBytes = 4096

    /// The header a console session's unsafe requests (anything but GET and HEAD) carry its CSRF
    /// token in; console forms carry it as the `csrf_token` field, which the console moves here.
    static let csrfHeader = HTTPField.Name("X-CSRF-Token")!

    /// The apps were reloaded: user tokens are checked again against the keys now configured.
    func appsReloaded() { verifiedUserTokens.forget() }

    /// Authenticates a request aimed at `app` (the app in the URL, if any). Throws 401 on a
    /// missing or bad credential; authorisation (403) is the caller's.
    public func authenticate(_ request: Request, app: String?) async throws -> Principal {
        if request.headers[.authorization] == nil, let sessions, let token = Self.sessionCookie(request) {
            return try await sessionPrincipal(request, token: token, sessions: sessions)
        }
        let credential = try Self.bearerCredential(request.headers[.authorization])
        if let key = APIKey(presented: credential) {
            guard let record = try await keys.verify(key) else { throw Self.unauthorized("unknown or revoked API key") }
            return record.principal
        }
        guard Self.isJWTShaped(credential) else {
            throw Self.unauthorized("the credential is neither an API key nor a JWT")
        }
        guard let app else {
            throw Self.unauthorized("a user token cannot be used here; this operation needs an API key")
        }
        guard credential.utf8.count <= Self.maxUserTokenBytes else {
            throw Self.unauthorized("the user token is longer than \(Self.maxUserTokenBytes) bytes, the most accepted")
        }
        // The epoch before the keys: a reload between here and `remember` makes the result uncached.
        let epoch = verifiedUserTokens.epoch
        guard let collection = apps.entry(app)?.userTokenKeys else {
            throw Self.unauthorized("user tokens are not enabled for this app")
        }
        let now = clock.date()
        if let principal = rememberedUser(credential, app: app, now: now) { return principal }
        do {
            let claims = try await collection.verify(credential, as: UserTokenClaims.self)
            try claims.exp.verifyNotExpired(currentDate: now)
            // The subject becomes a stored user id: it follows the same rule as `user_id`.
            guard (try? InputRules.identifier(claims.sub.value, field: "sub", maxBytes: InputRules.maxUserBytes)) != nil
            else {
                throw Self.unauthorized(
                    "the user token's sub must be a user id of 1-\(InputRules.maxUserBytes) bytes without control characters"
                )
            }
            verifiedUserTokens.remember(
                app: app,
                token: credential,
                subject: claims.sub.value,
                expires: claims.exp.value,
                epoch: epoch
            )
            return .user(app: app, userID: claims.sub.value)
        } catch let error as APIError {
            throw error
        } catch {
            throw Self.unauthorized("invalid or expired user token")
        }
    }

    /// The console session cookie's value, if the request has one: the `__Host-` one (set over
    /// TLS) first, else the plain one (set over plain HTTP; ``ConsoleCookieMiddleware`` removes it
    /// from requests that came over TLS).
    static func sessionCookie(_ request: Request) -> String? {
        let header = request.headers[values: .cookie].joined(separator: "; ")
        guard !header.isEmpty else { return nil }
        return ConsoleSessionStore.cookie(ConsoleSessionStore.secureCookieName, in: header)
            ?? ConsoleSessionStore.cookie(ConsoleSessionStore.cookieName, in: header)
    }

    /// The principal of a console session: 401 when the session is over, 403 when an unsafe
    /// request lacks the session's CSRF token.
    private func sessionPrincipal(
        _ request: Request,
        token: String,
        sessions: ConsoleSessionStore
    ) async throws -> Principal {
        guard let session = try await sessions.session(token: token) else {
            throw Self.unauthorized(
                "the console session has ended (signed out, idle too long, or its API key was revoked); sign in again"
            )
        }
        if request.method != .get && request.method != .head {
            let presented = request.headers[Self.csrfHeader] ?? ""
            guard constantTimeEqual(Array(presented.utf8), Array(session.csrfToken.utf8)) else {
                throw APIError(
                    .forbidden,
                    code: "csrf_token_invalid",
                    message: "this request needs the console session's CSRF token"
                )
            }
        }
        return session.principal
    }

    /// The credential of an `Authorization: Bearer <credential>` header (the scheme in any case,
    /// spaces and tabs around the credential ignored); 401 when there is none.
    static func bearerCredential(_ header: String?) throws(APIError) -> String {
        guard let header else { throw Self.unauthorized("missing Authorization: Bearer credential") }
        let lowercased = { (byte: UInt8) in (0x41...0x5A).contains(byte) ? byte + 0x20 : byte }
        guard header.utf8.count > 7, zip(header.utf8, "bearer ".utf8).allSatisfy({ lowercased($0) == $1 }) else {
            throw Self.unauthorized("the Authorization header must be 'Bearer <credential>'")
        }
        return String(header.dropFirst(7).trimmingSpacesAndTabs())
    }

    /// Three dot-separated parts, as a JWT has.
    static func isJWTShaped(_ credential: String) -> Bool {
        credential.utf8.count(where: { $0 == UInt8(ascii: ".") }) == 2
    }

    /// The user of a user token of `app` that was checked before (signature, claims, subject) and
    /// has not expired: a lookup and a SHA-256 of the token, no signature check, no I/O. `nil` for
    /// any other credential, which ``authenticate(_:app:)`` then checks in full.
    func rememberedUser(_ credential: String, app: String, now: Date) -> Principal? {
        guard credential.utf8.count <= Self.maxUserTokenBytes, apps.entry(app)?.userTokenKeys != nil,
            let subject = verifiedUserTokens.subject(app: app, token: credential, now: now)
        else { return nil }
        return .user(app: app, userID: subject)
    }

    static func unauthorized(_ message: String) -> APIError {
        APIError(.unauthorized, code: "unauthorized", message: message, headers: [.wwwAuthenticate: "Bearer"])
    }

    static func forbidden(_ message: String) -> APIError {
        APIError(.forbidden, code: "forbidden", message: message)
    }
}

extension Authenticator {
    /// The app of a route under `…/apps/{app}/…` and who is calling, resolved the same way by every
    /// controller: the credential first (401), then the app (404 `app_not_found`), so a caller
    /// without a valid credential learns nothing about which apps exist. Authorisation (403) is the
    /// route's, since it depends on the scope and the user the request touches.
    func resolve(_ request: Request, context: some RequestContext) async throws -> (app: String, principal: Principal) {
        let app = try context.pathParameter("app")
        let principal = try await authenticate(request, app: app)
        return (try apps.requireKnown(app), principal)
    }

    /// Who is calling a route that names no app (401 without a valid credential).
    func resolve(_ request: Request) async throws -> Principal {
        try await authenticate(request, app: nil)
    }
}

extension Principal {
    /// Passes for an admin key only.
    func requireAdmin() throws {
        guard case .admin = self else { throw Authenticator.forbidden("this operation needs an admin API key") }
    }

    /// Passes when this principal may use `scope` on `app` with an app key (or is an admin).
    /// User tokens are checked by the caller, who knows which user the request touches.
    func requireAppKey(_ app: String, scope: APIKeyScope) throws {
        switch self {
        case .admin: return
        case .app(let id, let scopes):
            guard id == app else { throw Authenticator.forbidden("this API key belongs to another app") }
            guard scopes.contains(scope.rawValue) else {
                throw Authenticator.forbidden("this API key lacks the \(scope.rawValue) scope")
            }
        case .user:
            throw Authenticator.forbidden("this operation needs an app API key")
        }
    }

    /// Passes for an app key with `scope` on `app`, an admin, or the user `userID` of `app`.
    func require(_ app: String, scope: APIKeyScope, user userID: String?) throws {
        if case .user(let tokenApp, let subject) = self {
            guard tokenApp == app else { throw Authenticator.forbidden("this user token belongs to another app") }
            guard let userID, userID == subject else {
                throw Authenticator.forbidden("a user token may only touch its own user's data")
            }
            return
        }
        try requireAppKey(app, scope: scope)
    }
}
