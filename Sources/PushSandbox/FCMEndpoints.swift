import Foundation
import JWTKit
import Synchronization

/// FCM HTTP v1 (`POST /v1/projects/{project}/messages:send`) and Google's OAuth token endpoint
/// (`POST /token`), checked the way Google checks them: assertions must be signed with the key of
/// a known service account (when the sandbox was given any), access tokens must be ones this
/// sandbox issued, data values must be strings, the data map at most 4096 bytes.
final class FCMEndpoints: Sendable {
    let state: SandboxState
    /// The public keys of the service accounts whose assertions are accepted, by `client_email`;
    /// empty: signatures are not checked.
    private let serviceAccounts: [String: JWTKeyCollection]
    private let issued = Mutex<Set<String>>([])
    /// Numbers the message names FCM returns (`projects/…/messages/N`).
    private let messages = Atomic<UInt64>(0)

    init(state: SandboxState, serviceAccounts: [String: JWTKeyCollection] = [:]) {
        self.state = state
        self.serviceAccounts = serviceAccounts
    }

    /// The claims the token endpoint reads; the signature check needs them typed.
    struct Assertion: JWTPayload {
        var iss: IssuerClaim
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// The OAuth exchange: a JWT-bearer grant whose assertion is a well-formed JWT with the FCM
    /// scope, signed by a known service account's key. Refusals carry Google's `error` and
    /// `error_description`.
    func token(_ request: SandboxHTTPRequest) async -> SandboxHTTPResponse {
        let form = Self.form(String(decoding: request.body, as: UTF8.self))
        var status = 200
        var reason: String?
        var description: String?
        if let assertion = form["assertion"] { state.presented(assertion) }
        if form["grant_type"] != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
            (status, reason) = (400, "unsupported_grant_type")
        } else if let assertion = form["assertion"], let claims = Self.claims(of: assertion),
            (claims["scope"] as? String)?.contains("https://www.googleapis.com/auth/firebase.messaging") == true,
            let issuer = claims["iss"] as? String, let exp = claims["exp"] as? Double, exp > Date().timeIntervalSince1970
        {
            if !serviceAccounts.isEmpty {
                if let keys = serviceAccounts[issuer] {
                    if (try? await keys.verify(assertion, as: Assertion.self)) == nil {
                        (status, reason, description) = (400, "invalid_grant", "Invalid JWT Signature.")
                    }
                } else {
                    (status, reason, description) = (400, "invalid_grant", "Invalid grant: account not found")
                }
            }
        } else {
            (status, reason) = (400, "invalid_grant")
        }
        state.record(
            SandboxRequest(
                service: "oauth",
                path: request.path,
                headers: request.headers,
                body: "(assertion)",
                status: status,
                reason: reason,
                receivedAt: Date()
            )
        )
        guard status == 200 else {
            var body = ["error": reason ?? "invalid_request"]
            body["error_description"] = description
            return SandboxRouter.json(body, status: status)
        }
        let token = "sandbox-access-\(UUID().uuidString.lowercased())"
        issued.withLock { _ = $0.insert(token) }
        let body: [String: Any] = ["access_token": token, "expires_in": 3599, "token_type": "Bearer"]
        return SandboxHTTPResponse(
            status: 200,
            headers: [("content-type", "application/json")],
            body: (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])) ?? Data()
        )
    }

    func send(project: String, request: SandboxHTTPRequest) async -> SandboxHTTPResponse {
        var status = 200
        var code: String?
        var retryAfter: String?
        let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any]
        let message = object?["message"] as? [String: Any]
        let token = message?["token"] as? String ?? ""
        let bearer = request.headers["authorization"].flatMap { $0.lowercased().hasPrefix("bearer ") ? String($0.dropFirst(7)) : nil }
        if let bearer { state.presented(bearer) }
        if bearer == nil || !issued.withLock({ $0.contains(bearer!) }) {
            (status, code) = (401, "UNAUTHENTICATED")
        } else if message == nil || token.isEmpty {
            (status, code) = (400, "INVALID_ARGUMENT")
        } else if let data = message?["data"] {
            guard let strings = data as? [String: String] else {
                return record(project: project, request: request, status: 400, code: "INVALID_ARGUMENT", retryAfter: nil)
            }
            if strings.reduce(0, { $0 + $1.key.utf8.count + $1.value.utf8.count }) > 4096 { (status, code) = (400, "INVALID_ARGUMENT") }
        }
        if status == 200, let behaviour = state.takeBehaviour(for: token) {
            if let delay = behaviour.delayMilliseconds { await state.delay(milliseconds: delay) }
            if behaviour.status < 0 { return SandboxHTTPResponse(status: 0, dropConnection: true) }
            if behaviour.status != 0 && behaviour.status != 200 {
                (status, code, retryAfter) = (behaviour.status, behaviour.reason, behaviour.retryAfterHeader)
            }
        }
        return record(project: project, request: request, status: status, code: code, retryAfter: retryAfter)
    }

    private func record(project: String, request: SandboxHTTPRequest, status: Int, code: String?, retryAfter: String?) -> SandboxHTTPResponse {
        state.record(
            SandboxRequest(
                service: "fcm",
                path: request.path,
                headers: request.headers.filter { $0.key != "authorization" },
                body: String(decoding: request.body, as: UTF8.self),
                status: status,
                reason: code,
                receivedAt: Date()
            )
        )
        if status == 200 {
            let number = messages.wrappingAdd(1, ordering: .relaxed).newValue
            return SandboxRouter.json(["name": "projects/\(project)/messages/\(number)"])
        }
        let headers = retryAfter.map { [("retry-after", $0)] } ?? []
        let error: [String: Any] = [
            "error": [
                "code": status, "message": code ?? "error", "status": Self.googleStatus(status),
                "details": [["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": code ?? "UNSPECIFIED_ERROR"]],
            ]
        ]
        let body = (try? JSONSerialization.data(withJSONObject: error, options: [.sortedKeys])) ?? Data()
        return SandboxHTTPResponse(status: status, headers: headers + [("content-type", "application/json")], body: body)
    }

    static func googleStatus(_ status: Int) -> String {
        switch status {
        case 400: "INVALID_ARGUMENT"
        case 401: "UNAUTHENTICATED"
        case 403: "PERMISSION_DENIED"
        case 404: "NOT_FOUND"
        case 429: "RESOURCE_EXHAUSTED"
        case 503: "UNAVAILABLE"
        default: "INTERNAL"
        }
    }

    static func form(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? String($0) }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return fields
    }

    /// The claims of a JWT, signature not checked.
    static func claims(of jwt: String) -> [String: Any]? {
        let parts = jwt.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard let data = Data(base64Encoded: text) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }
}
