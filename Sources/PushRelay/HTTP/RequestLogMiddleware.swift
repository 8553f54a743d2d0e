import Hummingbird
import Logging

/// Logs one line per request (method, route, status, duration) without secrets.
///
/// The line names the route the router matched, with its parameters filled in from what the router
/// extracted, never the raw path: `{secret}` becomes `…`, `{token}` keeps its first 6 and last 4
/// characters, and so does a `{user}` of any length (the unread owner of a device linked to no
/// user is its token, and tokens have no minimum length). Redacting by position in the raw path could be bypassed
/// by its shape (`//v1/…`, `/v1//webhooks/…`), which the router still matches. A path that matches
/// no route is logged as `(no route)`: any of its segments could be a secret sent to the wrong place.
/// Hummingbird's own request logger would log the raw path.
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        Self.log(
            context.logger,
            method: Self.method(request.method.rawValue),
            route: Self.route(context.endpointPath, parameters: context.parameters),
            status: response.status.code,
            elapsed: ContinuousClock.now - start
        )
        return response
    }

    /// The request line, at info; also written by the handlers that answer on the event loop
    /// (``UnreadPollShortcut``, ``WebhookShortcut``), with a route already redacted.
    static func log(_ logger: Logger, method: String, route: String, status: Int, elapsed: Duration) {
        logger.info(
            "request",
            metadata: [
                "http.method": "\(method)", "http.route": "\(route)", "http.status": "\(status)",
                "http.duration_ms": "\(milliseconds(elapsed))",
            ]
        )
    }

    /// A duration in milliseconds, to the microsecond.
    static func milliseconds(_ elapsed: Duration) -> Double {
        Double(elapsed.components.attoseconds / 1_000_000_000_000) / 1000 + Double(elapsed.components.seconds) * 1000
    }

    static var unmatched: String { "(no route)" }

    /// The matched route's pattern with its parameters filled in, redacted as the type's comment
    /// says; ``unmatched`` when no route matched (the router then names the endpoint `NotFound`).
    static func route(_ pattern: String?, parameters: Parameters) -> String {
        guard let pattern, pattern.hasPrefix("/") else { return unmatched }
        var result = ""
        for component in pattern.split(separator: "/") {
            result += "/"
            guard component.first == "{", component.last == "}" else {
                result += component
                continue
            }
            let name = String(component.dropFirst().dropLast())
            guard let raw = parameters.get(name) else {
                result += component
                continue
            }
            result += redacted(name: name, value: PathSegment.decode(raw) ?? raw)
        }
        return result.isEmpty ? "/" : result
    }

    /// One parameter as it may be logged.
    static func redacted(name: String, value: String) -> String {
        switch name {
        case "secret":
            return "…"
        case "token", "user":
            // A user may be a device token of any length (the unread owner of a device linked to
            // no user is its token), so users are shortened like tokens, whatever their length.
            return Redaction.token(printable(value))
        default:
            return printable(value)
        }
    }

    /// Control characters escaped (`\n`), so a value cannot break or forge a log line, and at most
    /// 128 characters.
    static func printable(_ value: String) -> String {
        let clipped = value.count > 128 ? value.prefix(127) + "…" : Substring(value)
        guard clipped.unicodeScalars.contains(where: InputRules.isControl) else { return String(clipped) }
        return clipped.unicodeScalars.map { InputRules.isControl($0) ? $0.escaped(asASCII: true) : String($0) }.joined()
    }

    /// The method as sent when it is a plain token of at most 16 letters, else `(other)`.
    static func method(_ raw: String) -> String {
        raw.utf8.count <= 16
            && raw.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D })
            ? raw : "(other)"
    }
}
