import Foundation
import JWTKit
import Synchronization

/// `POST /3/device/{token}`, checked as APNs checks it.
struct APNsEndpoint: Sendable {
    let state: SandboxState
    let keys: JWTKeyCollection?
    let teams: [String: String]
    /// Keys tied to one environment, by key id.
    let keyEnvironments: [String: String]
    /// Provider tokens whose signature was already checked: a client reuses one token for up to an
    /// hour, and checking an ES256 signature per push would make the sandbox, not the client, the
    /// bottleneck of a benchmark. Age is still checked on every request.
    let verified = VerifiedTokens()
    /// The key id of the first provider token on each connection: APNs ties a connection to it.
    let connectionKeys = ConnectionKeys()

    final class ConnectionKeys: Sendable {
        private let table = Mutex<[Int: String]>([:])

        /// The key id the connection is tied to: `keyID` when it is the connection's first.
        func tie(_ connection: Int, to keyID: String) -> String {
            table.withLock { table in
                if let first = table[connection] { return first }
                table[connection] = keyID
                return keyID
            }
        }
    }

    final class VerifiedTokens: Sendable {
        private let table = Mutex<[String: ProviderClaims]>([:])

        func get(_ jwt: String) -> ProviderClaims? { table.withLock { $0[jwt] } }

        func put(_ jwt: String, _ claims: ProviderClaims) {
            table.withLock { table in
                if table.count >= 1000 { table.removeAll() }
                table[jwt] = claims
            }
        }
    }

    struct ProviderClaims: JWTPayload {
        var iss: IssuerClaim
        var iat: IssuedAtClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    struct Failure: Error {
        var status: Int
        var reason: String
    }

    struct APNsError: Encodable {
        var reason: String
        var timestamp: Int64?
    }

    func handle(token: String, request: SandboxHTTPRequest, environment: String) async -> SandboxHTTPResponse {
        var status = 200
        var reason: String?
        var headers: [(String, String)] = []
        var drop = false
        var invalidSince = Int64(Date().timeIntervalSince1970 * 1000)
        let apnsID = request.headers["apns-id"] ?? UUID().uuidString.lowercased()
        do {
            try await validate(token: token, request: request, environment: environment)
            if let behaviour = state.takeBehaviour(for: token) {
                if let delay = behaviour.delayMilliseconds { await state.delay(milliseconds: delay) }
                if behaviour.status < 0 {
                    drop = true
                } else if behaviour.status != 0 && behaviour.status != 200 {
                    status = behaviour.status
                    reason = behaviour.reason
                    if let retryAfter = behaviour.retryAfterHeader { headers.append(("retry-after", retryAfter)) }
                    if let since = behaviour.invalidSinceMilliseconds { invalidSince = since }
                }
            }
        } catch {
            status = error.status
            reason = error.reason
        }
        state.record(
            SandboxRequest(
                service: "apns",
                path: request.path,
                headers: request.headers.filter { $0.key != "authorization" },
                body: String(decoding: request.body, as: UTF8.self),
                status: drop ? 0 : status,
                reason: drop ? "connection dropped" : reason,
                receivedAt: Date()
            )
        )
        if drop { return SandboxHTTPResponse(status: 0, dropConnection: true) }
        headers.append(("apns-id", apnsID))
        guard let reason else { return SandboxHTTPResponse(status: 200, headers: headers) }
        // As APNs: `{"reason":"…"}`, and for 410 also `"timestamp"`, a number of milliseconds.
        return SandboxRouter.json(APNsError(reason: reason, timestamp: status == 410 ? invalidSince : nil), status: status, headers: headers)
    }

    private func validate(token: String, request: SandboxHTTPRequest, environment: String) async throws(Failure) {
        // A token tied to the other environment, as the other host would answer.
        if let home = state.environment(of: token), home != environment { throw Failure(status: 400, reason: "BadDeviceToken") }
        guard token.utf8.count >= 64, token.utf8.count <= 200, token.utf8.count % 2 == 0,
            token.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) || ($0 >= 65 && $0 <= 70) })
        else { throw Failure(status: 400, reason: "BadDeviceToken") }
        // Certificate authentication: no provider token, a client certificate naming the topic.
        if let certificateTopic = request.clientCertificateTopic {
            let topic = request.headers["apns-topic"] ?? certificateTopic
            guard topic == certificateTopic else { throw Failure(status: 400, reason: "TopicDisallowed") }
            try validateRequest(request, topic: topic)
            return
        }
        guard let authorization = request.headers["authorization"] else {
            throw Failure(status: 403, reason: "MissingProviderToken")
        }
        guard authorization.lowercased().hasPrefix("bearer ") else { throw Failure(status: 403, reason: "InvalidProviderToken") }
        state.presented(String(authorization.dropFirst(7)))
        if let keys {
            let jwt = String(authorization.dropFirst(7))
            let claims: ProviderClaims
            if let known = verified.get(jwt) {
                claims = known
            } else {
                do {
                    claims = try await keys.verify(jwt, as: ProviderClaims.self)
                } catch {
                    throw Failure(status: 403, reason: "InvalidProviderToken")
                }
                verified.put(jwt, claims)
            }
            // As APNs: a token must name its key (`kid`), and be issued by the team that key
            // belongs to; another team's or an unknown key's token is InvalidProviderToken.
            guard let kid = Self.keyID(of: jwt), let team = teams[kid], team == claims.iss.value else {
                throw Failure(status: 403, reason: "InvalidProviderToken")
            }
            // A connection serves the key of its first provider token only.
            guard connectionKeys.tie(request.connection, to: kid) == kid else { throw Failure(status: 403, reason: "UnrelatedKeyIdInToken") }
            if let home = keyEnvironments[kid], home != environment { throw Failure(status: 403, reason: "BadEnvironmentKeyInToken") }
            if Date().timeIntervalSince(claims.iat.value) > 3600 {
                state.providerTokenExpired(keyID: kid)
                throw Failure(status: 403, reason: "ExpiredProviderToken")
            }
            if !state.admitProviderToken(jwt, keyID: kid) {
                throw Failure(status: 429, reason: "TooManyProviderTokenUpdates")
            }
        }
        try validateRequest(request, topic: request.headers["apns-topic"])
    }

    /// The `kid` of a JWT's header (already verified, so well-formed).
    static func keyID(of jwt: String) -> String? {
        guard var header = jwt.split(separator: ".").first.map(String.init) else { return nil }
        header = header.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        header += String(repeating: "=", count: (4 - header.count % 4) % 4)
        guard let data = Data(base64Encoded: header), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        return object["kid"] as? String
    }

    /// The checks after authentication: headers and payload.
    private func validateRequest(_ request: SandboxHTTPRequest, topic: String?) throws(Failure) {
        let body = request.body
        guard let topic, !topic.isEmpty else { throw Failure(status: 400, reason: "MissingTopic") }
        let pushType = request.headers["apns-push-type"] ?? "alert"
        let types = ["alert", "background", "voip", "complication", "fileprovider", "location", "liveactivity", "pushtotalk", "widgets", "mdm"]
        guard types.contains(pushType) else { throw Failure(status: 400, reason: "InvalidPushType") }
        let priority = request.headers["apns-priority"] ?? "10"
        guard ["10", "5", "1"].contains(priority), !(pushType == "background" && priority == "10") else {
            throw Failure(status: 400, reason: "BadPriority")
        }
        if let expiration = request.headers["apns-expiration"], Int(expiration) == nil {
            throw Failure(status: 400, reason: "BadExpirationDate")
        }
        if let collapse = request.headers["apns-collapse-id"], collapse.utf8.count > 64 {
            throw Failure(status: 400, reason: "BadCollapseId")
        }
        if let id = request.headers["apns-id"], UUID(uuidString: id) == nil { throw Failure(status: 400, reason: "BadMessageId") }
        guard !body.isEmpty else { throw Failure(status: 400, reason: "PayloadEmpty") }
        guard body.count <= 4096 else { throw Failure(status: 413, reason: "PayloadTooLarge") }
        guard let payload = try? JSONSerialization.jsonObject(with: body) as? [String: Any], payload["aps"] is [String: Any] else {
            throw Failure(status: 400, reason: "PayloadEmpty")
        }
    }
}
