import Foundation
import HTTPTypes
import Hummingbird
import JWTKit
import NIOCore

/// `POST /3/device/{token}`, checked as APNs checks it.
struct APNsEndpoint: Sendable {
    let state: SandboxState
    let keys: JWTKeyCollection?
    let teams: [String: String]

    struct ProviderClaims: JWTPayload {
        var iss: IssuerClaim
        var iat: IssuedAtClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    struct Failure: Error {
        var status: HTTPResponse.Status
        var reason: String
    }

    @Sendable func handle(_ request: Request, context: some RequestContext) async throws -> Response {
        let token = try context.parameters.require("token")
        var request = request
        let body = try await request.collectBody(upTo: 1 << 20)
        let bytes = Data(body.readableBytesView)
        var status = HTTPResponse.Status.ok
        var reason: String?
        var headers: HTTPFields = [:]
        let apnsID = request.headers[.apnsID] ?? UUID().uuidString.lowercased()
        do {
            try await validate(token: token, request: request, body: bytes)
            if let behaviour = state.takeBehaviour(for: token) {
                if let delay = behaviour.delayMilliseconds { try await Task.sleep(for: .milliseconds(delay)) }
                if behaviour.status != 0 && behaviour.status != 200 {
                    status = HTTPResponse.Status(code: behaviour.status)
                    reason = behaviour.reason
                    if let retryAfter = behaviour.retryAfter { headers[.retryAfter] = String(retryAfter) }
                }
            }
        } catch let failure as Failure {
            status = failure.status
            reason = failure.reason
        }
        state.record(
            SandboxRequest(
                service: "apns", path: request.uri.path,
                headers: Dictionary(request.headers.map { ($0.name.canonicalName, $0.value) }, uniquingKeysWith: { $1 }),
                body: String(decoding: bytes, as: UTF8.self), status: Int(status.code), reason: reason, receivedAt: Date()
            )
        )
        headers[.apnsID] = apnsID
        guard let reason else { return Response(status: .ok, headers: headers) }
        var error: [String: String] = ["reason": reason]
        if status.code == 410 { error["timestamp"] = String(Int(Date().timeIntervalSince1970 * 1000)) }
        return try PushSandbox.jsonResponse(error, status: status, headers: headers)
    }

    private func validate(token: String, request: Request, body: Data) async throws {
        guard token.utf8.count >= 64, token.utf8.count <= 200, token.utf8.count % 2 == 0,
            token.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) || ($0 >= 65 && $0 <= 70) })
        else { throw Failure(status: .badRequest, reason: "BadDeviceToken") }
        guard let authorization = request.headers[.authorization] else {
            throw Failure(status: .forbidden, reason: "MissingProviderToken")
        }
        guard authorization.lowercased().hasPrefix("bearer ") else { throw Failure(status: .forbidden, reason: "InvalidProviderToken") }
        if let keys {
            let jwt = String(authorization.dropFirst(7))
            let claims: ProviderClaims
            do {
                claims = try await keys.verify(jwt, as: ProviderClaims.self)
            } catch {
                throw Failure(status: .forbidden, reason: "InvalidProviderToken")
            }
            guard teams.values.contains(claims.iss.value) else { throw Failure(status: .forbidden, reason: "InvalidProviderToken") }
            if Date().timeIntervalSince(claims.iat.value) > 3600 { throw Failure(status: .forbidden, reason: "ExpiredProviderToken") }
        }
        guard let topic = request.headers[.apnsTopic], !topic.isEmpty else { throw Failure(status: .badRequest, reason: "MissingTopic") }
        let pushType = request.headers[.apnsPushType] ?? "alert"
        let types = ["alert", "background", "voip", "complication", "fileprovider", "location", "liveactivity", "pushtotalk", "widgets", "mdm"]
        guard types.contains(pushType) else { throw Failure(status: .badRequest, reason: "InvalidPushType") }
        let priority = request.headers[.apnsPriority] ?? "10"
        guard ["10", "5", "1"].contains(priority), !(pushType == "background" && priority == "10") else {
            throw Failure(status: .badRequest, reason: "BadPriority")
        }
        if let expiration = request.headers[.apnsExpiration], Int(expiration) == nil {
            throw Failure(status: .badRequest, reason: "BadExpirationDate")
        }
        if let collapse = request.headers[.apnsCollapseID], collapse.utf8.count > 64 {
            throw Failure(status: .badRequest, reason: "BadCollapseId")
        }
        if let id = request.headers[.apnsID], UUID(uuidString: id) == nil { throw Failure(status: .badRequest, reason: "BadMessageId") }
        guard !body.isEmpty else { throw Failure(status: .badRequest, reason: "PayloadEmpty") }
        guard body.count <= 4096 else { throw Failure(status: .contentTooLarge, reason: "PayloadTooLarge") }
        guard let payload = try? JSONSerialization.jsonObject(with: body) as? [String: Any], payload["aps"] is [String: Any] else {
            throw Failure(status: .badRequest, reason: "PayloadEmpty")
        }
    }
}

extension HTTPField.Name {
    static let apnsID = HTTPField.Name("apns-id")!
    static let apnsTopic = HTTPField.Name("apns-topic")!
    static let apnsPushType = HTTPField.Name("apns-push-type")!
    static let apnsPriority = HTTPField.Name("apns-priority")!
    static let apnsExpiration = HTTPField.Name("apns-expiration")!
    static let apnsCollapseID = HTTPField.Name("apns-collapse-id")!
}
