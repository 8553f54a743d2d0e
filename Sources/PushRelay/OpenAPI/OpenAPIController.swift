import Hummingbird
import NIOCore

/// Serves ``OpenAPIDocument``.
struct OpenAPIController<Context: RequestContext>: Sendable {
    var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self).get("/openapi.yaml", use: document)
    }

    @Sendable func document(_ request: Request, context: Context) async throws -> Response {
        Response(
            status: .ok,
            headers: [.contentType: "application/yaml; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.yaml))
        )
    }
}
