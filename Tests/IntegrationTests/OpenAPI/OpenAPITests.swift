import Foundation
import HummingbirdTesting
import Postgres
import TestSupport
import Testing
import Yams

@testable import PushRelay

@Suite("OpenAPI document")
struct OpenAPITests {
    @Test("the served document lists exactly the routes the router serves")
    func documentMatchesRoutes() async throws {
        let conninfo = try await TestDatabase.makeDatabase()
        let database = try await Database.open(
            configuration: DatabaseSettings(url: conninfo),
            dataDirectory: NSTemporaryDirectory(),
            logger: TestDatabase.logger
        )
        let apps = try await AppDirectory(apps: [])
        let settings = WebhookSettings()
        let writer = IntakeWriter(queue: DeliveryQueue(client: database.client), logger: TestDatabase.logger)
        let listener = try PostgresListener(conninfo: conninfo, channels: [UnreadChannel.name], logger: TestDatabase.logger)
        let hub = UnreadHub(events: listener.events())
        let authenticator = Authenticator(keys: APIKeyStore(client: database.client), apps: apps)
        let (_, routes) = RelayRoutes(
            database: database,
            apps: apps,
            authenticator: authenticator,
            writer: writer,
            webhooks: settings,
            hub: hub,
            metrics: RelayMetrics()
        ).router()

        let document = try #require(try Yams.load(yaml: OpenAPIDocument.yaml) as? [String: Any])
        #expect(document["openapi"] as? String == "3.0.3")
        let paths = try #require(document["paths"] as? [String: Any])
        var documented = Set<Route>()
        for (path, item) in paths {
            let operations = try #require(item as? [String: Any])
            for method in ["get", "put", "post", "delete", "patch", "head"] where operations[method] != nil {
                documented.insert(Route(method: method.uppercased(), path: path))
            }
        }
        #expect(
            documented == Set(routes),
            "documented but not served: \(documented.subtracting(routes)); served but not documented: \(Set(routes).subtracting(documented))"
        )
        #expect(routes.count >= 8)
        await database.client.close()
    }

    @Test("GET /openapi.yaml serves the document as YAML")
    func served() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let response = try await client.execute(uri: "/openapi.yaml", method: .get)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType]?.hasPrefix("application/yaml") == true)
            #expect(String(buffer: response.body) == OpenAPIDocument.yaml)
        }
    }
}
