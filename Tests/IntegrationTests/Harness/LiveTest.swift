import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import TestSupport

@testable import HummingbirdTesting

extension ApplicationProtocol {
    /// `test(.live)` with a read timeout that only bounds a hang (``hangCeiling``): the relay serves
    /// on a free port and `test` gets a client on one connection to it. HummingbirdTesting's own
    /// live client gives up after 20 s without a byte, which a loaded machine reaches for a request
    /// that takes milliseconds on an idle one.
    func testLive<Value>(_ test: @Sendable (any TestClientProtocol) async throws -> Value) async throws -> Value {
        let application = TestApplication(base: self)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            let services = ServiceGroup(
                configuration: .init(services: [application], gracefulShutdownSignals: [.sigterm, .sigint], logger: application.logger)
            )
            group.addTask { try await services.run() }
            let port = await application.portPromise.wait()
            let client = TestClient(host: "localhost", port: port, configuration: .init(timeout: hangCeiling))
            client.connect()
            do {
                let value = try await test(LiveClient(client: client))
                try await client.shutdown()
                await services.triggerGracefulShutdown()
                return value
            } catch {
                try await client.shutdown()
                await services.triggerGracefulShutdown()
                throw error
            }
        }
    }
}

/// The client ``ApplicationProtocol/testLive(_:)`` hands a test: HTTP/1.1, keep-alive, one connection.
private struct LiveClient: TestClientProtocol {
    let client: TestClient

    func executeRequest(uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?) async throws -> TestResponse {
        var headers = headers
        headers[.connection] = "keep-alive"
        let request = TestClient.Request(uri, method: method, authority: "localhost", headers: headers, body: body)
        let response = try await client.execute(request)
        return TestResponse(head: response.head, body: response.body ?? ByteBuffer(), trailerHeaders: response.trailerHeaders)
    }

    var port: Int? { client.port }
}
