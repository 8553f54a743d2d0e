import Foundation
import JWTKit

/// The sandbox's endpoints.
///
/// - `POST /3/device/{token}`: APNs, checked as APNs checks it (``APNsEndpoint``); under
///   `/apns-sandbox/3/device/{token}` as APNs' development environment.
/// - `POST /v1/projects/{project}/messages:send` and `POST /token`: FCM HTTP v1 and its OAuth
///   exchange (``FCMEndpoints``), which checks assertions' signatures when
///   ``SandboxConfiguration/serviceAccountKeys`` names accounts.
/// - `POST /api/v2/push_notification_devices/destroy_many`: Zendesk Bulk Unregister.
/// - `POST /events[/…]`: a customer's receiver of PushRelay's feedback events (``EventsEndpoint``).
/// - `POST /sink`: 200 with no checks, for measuring a client.
/// - `GET /sandbox/received[?service=apns]`, `DELETE /sandbox/received`: what arrived.
/// - `PUT /sandbox/behaviours/{token}` with a ``SandboxBehaviour``, `DELETE` to clear it.
struct SandboxRouter: Sendable {
    let state: SandboxState
    let apns: APNsEndpoint
    let fcm: FCMEndpoints
    let zendesk: ZendeskEndpoint
    let events: EventsEndpoint

    init(configuration: SandboxConfiguration, state: SandboxState) async throws {
        self.state = state
        var keys: JWTKeyCollection?
        if !configuration.apnsKeys.isEmpty {
            let collection = JWTKeyCollection()
            for (kid, key) in configuration.apnsKeys {
                await collection.add(ecdsa: try ES256PublicKey(pem: key.publicKeyPEM), kid: JWKIdentifier(string: kid))
            }
            keys = collection
        }
        apns = APNsEndpoint(
            state: state,
            keys: keys,
            teams: configuration.apnsKeys.mapValues(\.teamID),
            keyEnvironments: configuration.apnsKeys.compactMapValues(\.environment)
        )
        var accounts: [String: JWTKeyCollection] = [:]
        for (email, pem) in configuration.serviceAccountKeys {
            accounts[email] = await JWTKeyCollection().add(rsa: try Insecure.RSA.PublicKey(pem: pem), digestAlgorithm: .sha256)
        }
        fcm = FCMEndpoints(state: state, serviceAccounts: accounts)
        zendesk = ZendeskEndpoint(state: state)
        events = EventsEndpoint(state: state, secret: configuration.eventSigningSecret)
    }

    func respond(_ request: SandboxHTTPRequest) async -> SandboxHTTPResponse {
        let segments = request.path.split(separator: "/").map(String.init)
        switch (request.method, segments.first) {
        case ("POST", "3") where segments.count == 3 && segments[1] == "device":
            return await apns.handle(token: segments[2], request: request, environment: "production")
        case ("POST", "apns-sandbox") where segments.count == 4 && segments[1] == "3" && segments[2] == "device":
            // APNs' development environment, for an app whose `sandbox_url` ends in /apns-sandbox.
            return await apns.handle(token: segments[3], request: request, environment: "sandbox")
        case ("POST", "v1") where segments.count == 4 && segments[1] == "projects" && segments[3] == "messages:send":
            return await fcm.send(project: segments[2], request: request)
        case ("POST", "token") where segments.count == 1:
            return await fcm.token(request)
        case ("POST", "api") where segments == ["api", "v2", "push_notification_devices", "destroy_many"]:
            return await zendesk.destroyMany(request)
        case ("POST", "events"):
            return await events.receive(request)
        case ("POST", "sink"):
            state.countSink(connection: request.connection)
            return SandboxHTTPResponse(status: 200)
        case ("GET", "sandbox") where segments == ["sandbox", "received"]:
            return Self.json(["requests": state.requests(service: request.query["service"])])
        case ("DELETE", "sandbox") where segments == ["sandbox", "received"]:
            state.clear()
            return SandboxHTTPResponse(status: 204)
        case ("PUT", "sandbox") where segments.count == 3 && segments[1] == "behaviours":
            guard let behaviour = try? JSONDecoder().decode(SandboxBehaviour.self, from: request.body) else {
                return Self.json(
                    ["error": "expected {\"status\":…,\"reason\"?,\"retry_after\"?,\"retry_after_text\"?,\"delay_ms\"?,\"times\"?}"],
                    status: 400
                )
            }
            state.setBehaviour(behaviour, for: segments[2])
            return SandboxHTTPResponse(status: 204)
        case ("DELETE", "sandbox") where segments.count == 3 && segments[1] == "behaviours":
            state.setBehaviour(nil, for: segments[2])
            return SandboxHTTPResponse(status: 204)
        default:
            return Self.json(["error": "not found"], status: 404)
        }
    }

    static func json(_ value: some Encodable, status: Int = 200, headers: [(String, String)] = []) -> SandboxHTTPResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        let body = (try? encoder.encode(value)) ?? Data()
        return SandboxHTTPResponse(status: status, headers: headers + [("content-type", "application/json")], body: body)
    }
}
