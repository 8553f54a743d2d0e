import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdHTTP2
import JWTKit
import Logging
import NIOCore

/// Settings of the sandbox.
public struct SandboxConfiguration: Sendable {
    public var host: String
    /// 0 picks a free port (read it from `onServerRunning`).
    public var port: Int
    /// Where the CA certificate is written.
    public var directory: String
    /// APNs signing keys the sandbox accepts, by key id. Empty: any bearer token is accepted.
    public var apnsKeys: [String: APNsKey]

    /// A team's public key (PEM) for checking provider JWTs.
    public struct APNsKey: Sendable {
        public var teamID: String
        public var publicKeyPEM: String
        public init(teamID: String, publicKeyPEM: String) {
            self.teamID = teamID
            self.publicKeyPEM = publicKeyPEM
        }
    }

    public init(host: String = "127.0.0.1", port: Int = 0, directory: String, apnsKeys: [String: APNsKey] = [:]) {
        self.host = host
        self.port = port
        self.directory = directory
        self.apnsKeys = apnsKeys
    }
}

/// A local stand-in for APNs over HTTP/2 and TLS that validates requests the way Apple does,
/// answers chosen tokens with chosen errors, and records what it received.
///
/// Control endpoints (plain JSON): `GET /sandbox/received[?service=apns]`, `DELETE /sandbox/received`,
/// `PUT /sandbox/behaviours/{token}` with a ``SandboxBehaviour``, `DELETE /sandbox/behaviours/{token}`.
/// `POST /sink` answers 200 with no checks, for measuring a client.
public enum PushSandbox {
    /// Builds the sandbox application. Run it as a service; `onServerRunning` receives the bound port.
    public static func makeApplication(
        configuration: SandboxConfiguration,
        state: SandboxState,
        logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws -> (application: some ApplicationProtocol, certificates: SandboxCertificates) {
        let certificates = try SandboxCertificates.generate(directory: configuration.directory)
        var keys: JWTKeyCollection?
        if !configuration.apnsKeys.isEmpty {
            let collection = JWTKeyCollection()
            for (kid, key) in configuration.apnsKeys {
                await collection.add(ecdsa: try ES256PublicKey(pem: key.publicKeyPEM), kid: JWKIdentifier(string: kid))
            }
            keys = collection
        }
        let apns = APNsEndpoint(state: state, keys: keys, teams: configuration.apnsKeys.mapValues(\.teamID))
        let router = Router()
        router.post("/3/device/{token}", use: apns.handle)
        router.post("/sink") { request, _ -> HTTPResponse.Status in
            // Read the body to its end: answering before the client's stream is finished makes the
            // server reset it, and an HTTP/2 client may then send the request again.
            var request = request
            _ = try await request.collectBody(upTo: 1 << 20)
            state.countSink()
            return .ok
        }
        router.get("/sandbox/received") { request, _ -> Response in
            let service = request.uri.queryParameters["service"].map(String.init)
            return try jsonResponse(["requests": state.requests(service: service)])
        }
        router.delete("/sandbox/received") { _, _ -> HTTPResponse.Status in
            state.clear()
            return .noContent
        }
        router.put("/sandbox/behaviours/{token}") { request, context -> HTTPResponse.Status in
            let token = try context.parameters.require("token")
            let behaviour = try await request.decode(as: SandboxBehaviour.self, context: context)
            state.setBehaviour(behaviour, for: token)
            return .noContent
        }
        router.delete("/sandbox/behaviours/{token}") { _, context -> HTTPResponse.Status in
            state.setBehaviour(nil, for: try context.parameters.require("token"))
            return .noContent
        }
        let application = Application(
            router: router,
            server: try .http2Upgrade(tlsConfiguration: try certificates.serverTLSConfiguration()),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "PushRelaySandbox"),
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger
        )
        return (application, certificates)
    }

    static func jsonResponse(_ value: some Encodable, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        var headers = headers
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
    }
}
