import Crypto
import Foundation

/// A customer's receiver of PushRelay's feedback events (`POST /events`, any path below it),
/// checking what a real receiver should: `X-PushRelay-Timestamp` within five minutes of now, and
/// `X-PushRelay-Signature` = base64(HMAC-SHA256(secret, timestamp + body)), then a body
/// `{"events":[…]}`. Bad signatures get 401, a bad body 400; both are recorded with the reason.
/// A behaviour set for the key `events:<last path segment>` (one receiver, such as
/// `events:support` for `/events/support`), or else `events` (every receiver), makes it answer with
/// that status (and `Retry-After`, after `delay_ms`) for the next `times` requests, as a failing
/// receiver would.
struct EventsEndpoint: Sendable {
    let state: SandboxState
    let secret: String?

    func receive(_ request: SandboxHTTPRequest) async -> SandboxHTTPResponse {
        var status = 200
        var reason: String?
        var headers: [(String, String)] = []
        if let problem = check(request) {
            (status, reason) = problem
        } else if let failure = await
            (state.takeBehaviour(for: "events:" + (request.path.split(separator: "/").last.map(String.init) ?? ""))
            ?? state.takeBehaviour(for: "events"))?.failure(defaultReason: "receiver failing", state: state)
        {
            (status, reason, headers) = (failure.status, failure.reason, failure.headers)
        }
        state.record(
            SandboxRequest(
                service: "events",
                path: request.path,
                headers: request.headers,
                body: String(decoding: request.body, as: UTF8.self),
                status: status,
                reason: reason,
                receivedAt: Date()
            )
        )
        guard let reason else { return SandboxRouter.json([String: String]()) }
        return SandboxRouter.json(["error": reason], status: status, headers: headers)
    }

    /// The status and reason of a request a receiver must refuse, or `nil`.
    private func check(_ request: SandboxHTTPRequest) -> (Int, String)? {
        guard let secret else { return (401, "this receiver has no signing secret") }
        guard let timestamp = request.headers["x-pushrelay-timestamp"], let seconds = Double(timestamp) else {
            return (401, "missing or malformed X-PushRelay-Timestamp")
        }
        guard abs(Date().timeIntervalSince1970 - seconds) <= 300 else { return (401, "stale X-PushRelay-Timestamp") }
        guard let signature = request.headers["x-pushrelay-signature"], let mac = Data(base64Encoded: signature) else {
            return (401, "missing or malformed X-PushRelay-Signature")
        }
        var signed = Data(timestamp.utf8)
        signed.append(request.body)
        guard HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: signed, using: SymmetricKey(data: Data(secret.utf8))) else {
            return (401, "signature mismatch")
        }
        guard let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any], object["events"] is [Any] else {
            return (400, "body must be {\"events\":[…]}")
        }
        return nil
    }
}
