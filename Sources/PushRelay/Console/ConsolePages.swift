import HTTPTypes
import Hummingbird
import Mustache
import NIOCore

/// The console's templates (Mustache, compiled once at start-up) and how a page is answered.
///
/// The templates are the `.mustache` files in `Console/Assets/`, embedded in the binary at build
/// time (``EmbeddedAssets``, by the EmbedAssets plugin) with the stylesheet and the script, so the
/// console needs no files beside it and no network: no CDN, no web fonts. Every value is
/// HTML-escaped by Mustache (`{{…}}`).
struct ConsolePages: Sendable {
    /// The templates by name. `layout` is the page frame; each page fills its `content` block.
    static let templates: [(String, String)] = [
        ("layout", EmbeddedAssets.layout_mustache), ("login", EmbeddedAssets.login_mustache),
        ("overview", EmbeddedAssets.overview_mustache),
        ("find", EmbeddedAssets.find_mustache), ("notification", EmbeddedAssets.notification_mustache),
        ("delivery", EmbeddedAssets.delivery_mustache), ("devices", EmbeddedAssets.devices_mustache),
        ("unregister", EmbeddedAssets.unregister_mustache), ("jobs", EmbeddedAssets.jobs_mustache),
        ("apps", EmbeddedAssets.apps_mustache),
        ("message", EmbeddedAssets.message_mustache),
    ]

    let library: MustacheLibrary

    init() throws {
        var library = MustacheLibrary()
        for (name, text) in Self.templates {
            try library.register(text, named: name)
        }
        self.library = library
    }

    /// Headers of every console page: no caching, no framing, scripts and styles from the relay only.
    static let securityHeaders: HTTPFields = [
        .contentType: "text/html; charset=utf-8",
        .cacheControl: "no-store",
        .contentSecurityPolicy:
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
            + "form-action 'self'; base-uri 'none'",
        HTTPField.Name("X-Frame-Options")!: "DENY",
        HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        HTTPField.Name("Referrer-Policy")!: "no-referrer",
    ]

    func html<View>(
        template: String,
        page: ConsoleView.ConsolePage<View>,
        status: HTTPResponse.Status = .ok
    ) -> Response {
        let text = library.render(page, withTemplate: template) ?? "template \(template) is missing"
        return Response(
            status: status,
            headers: Self.securityHeaders,
            body: .init(byteBuffer: ByteBuffer(string: text))
        )
    }

    /// A page with one message (a refused form, an API error after an action).
    func message(
        _ visit: ConsoleVisit,
        title: String,
        page: String,
        text: String,
        status: HTTPResponse.Status
    ) -> Response {
        html(
            template: "message",
            page: visit.page(title: title, page: page, view: ConsoleView.MessageView(message: text)),
            status: status
        )
    }

    static func asset(_ text: String, type: String) -> Response {
        Response(
            status: .ok,
            headers: [
                .contentType: type, .cacheControl: "no-cache", HTTPField.Name("X-Content-Type-Options")!: "nosniff",
            ],
            body: .init(byteBuffer: ByteBuffer(string: text))
        )
    }
}
