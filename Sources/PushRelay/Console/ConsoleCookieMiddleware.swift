import HTTPTypes
import Hummingbird

/// Over TLS, only the console's `__Host-` cookies count. A browser accepts a `__Host-` cookie only
/// from this host itself, with `Secure` and no `Domain`; a plain-named one can be set for this host
/// by any sibling subdomain (cookie tossing), so on a request that came over TLS
/// (``ConsoleController/isSecure(_:context:)``) the plain `pushrelay_session` and `pushrelay_login`
/// pairs are removed before the session and sign-in checks read them. Over plain HTTP both names
/// are read, the `__Host-` one first.
struct ConsoleCookieMiddleware: RouterMiddleware {
    typealias Context = AppRequestContext
    let console: ConsoleController

    /// The cookie names that a request over TLS may carry only with the `__Host-` prefix.
    static let prefixedOnly: Set<Substring> = [
        Substring(ConsoleSessionStore.cookieName), Substring(ConsoleController.loginCookie),
    ]

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let values = request.headers[values: .cookie]
        guard !values.isEmpty, console.isSecure(request, context: context) else {
            return try await next(request, context)
        }
        let kept = values.map(Self.withoutPlainConsoleCookies)
        guard kept != values else { return try await next(request, context) }
        var head = request.head
        head.headerFields[values: .cookie] = kept.filter { !$0.isEmpty }
        return try await next(Request(head: head, body: request.body), context)
    }

    /// A `Cookie` header value without the plain-named console cookies.
    static func withoutPlainConsoleCookies(_ header: String) -> String {
        header.split(separator: ";")
            .filter { pair in
                let trimmed = pair.trimmingSpacesAndTabs()
                let name = trimmed.firstIndex(of: "=").map { trimmed[..<$0] } ?? trimmed
                return !prefixedOnly.contains(name)
            }
            .map { $0.trimmingSpacesAndTabs() }
            .joined(separator: "; ")
    }
}
