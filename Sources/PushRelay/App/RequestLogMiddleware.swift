import Hummingbird
import Logging

/// Logs one line per request (method, path, status, duration) with secrets taken out of the path:
/// the webhook secret becomes `…` and device tokens keep only their first 6 and last 4 characters.
/// Hummingbird's own request logger would log the raw path, and with it both.
struct RequestLogMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        context.logger.info(
            "request",
            metadata: [
                "http.method": "\(request.method.rawValue)",
                "http.path": "\(Self.redacted(request.uri.path))",
                "http.status": "\(response.status.code)",
                "http.duration_ms": "\(Double(elapsed.components.attoseconds / 1_000_000_000_000) / 1000 + Double(elapsed.components.seconds) * 1000)",
            ]
        )
        return response
    }

    /// `/v1/webhooks/zendesk/{app}/{secret}`, `/v1/apps/{app}/devices/{token}` and a token-sized
    /// `/v1/apps/{app}/users/{owner}` lose their secrets.
    static func redacted(_ path: String) -> String {
        var segments = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // ["", "v1", "webhooks", "zendesk", app, secret, …]
        if segments.count >= 6, segments[1] == "v1", segments[2] == "webhooks" {
            segments[5] = "…"
        }
        // ["", "v1", "apps", app, "devices", token, …]
        if segments.count >= 6, segments[1] == "v1", segments[2] == "apps", segments[4] == "devices" {
            segments[5] = DeviceToken.redacted(segments[5])
        }
        // ["", "v1", "apps", app, "users", owner, …]: the unread owner of a device linked to no user
        // is its token. Device tokens are at least 32 characters; user ids that long are shortened too.
        if segments.count >= 6, segments[1] == "v1", segments[2] == "apps", segments[4] == "users", segments[5].count >= 32 {
            segments[5] = DeviceToken.redacted(segments[5])
        }
        return segments.joined(separator: "/")
    }
}
