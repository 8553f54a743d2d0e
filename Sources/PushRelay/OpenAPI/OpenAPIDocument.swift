/// The OpenAPI 3 description of every endpoint, served at `GET /openapi.yaml`.
///
/// The document is `openapi.yaml` beside this file, embedded in the binary at build time
/// (``EmbeddedAssets``, by the EmbedAssets plugin); a test checks that its paths and methods are
/// exactly the routes the router serves.
enum OpenAPIDocument {
    static let yaml = EmbeddedAssets.openapi_yaml
}
