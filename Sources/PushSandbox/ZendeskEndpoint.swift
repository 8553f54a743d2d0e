import Foundation

/// Zendesk's Bulk Unregister (`POST /api/v2/push_notification_devices/destroy_many`): Basic
/// authentication required, body `{"push_notification_devices":[...]}`. A behaviour set for the key
/// `zendesk` makes it answer with that error (429 with Retry-After, 5xx) for the next calls.
struct ZendeskEndpoint: Sendable {
    let state: SandboxState

    func destroyMany(_ request: SandboxHTTPRequest) async -> SandboxHTTPResponse {
        var status = 200
        var reason: String?
        var headers: [(String, String)] = []
        let object = (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any]
        if let authorization = request.headers["authorization"], authorization.lowercased().hasPrefix("basic ") {
            state.presented(String(authorization.dropFirst(6)))
        }
        if request.headers["authorization"]?.lowercased().hasPrefix("basic ") != true {
            (status, reason) = (401, "Couldn't authenticate you")
        } else if !(object?["push_notification_devices"] is [String]) {
            (status, reason) = (400, "push_notification_devices must be a list of identifiers")
        } else if let failure = await state.takeBehaviour(for: "zendesk")?.failure(defaultReason: "error", state: state) {
            (status, reason, headers) = (failure.status, failure.reason, failure.headers)
        }
        state.record(
            SandboxRequest(
                service: "zendesk",
                path: request.path,
                headers: request.headers.filter { $0.key != "authorization" },
                body: String(decoding: request.body, as: UTF8.self),
                status: status,
                reason: reason,
                receivedAt: Date()
            )
        )
        guard let reason else { return SandboxRouter.json([String: String]()) }
        return SandboxRouter.json(["error": reason], status: status, headers: headers)
    }
}
