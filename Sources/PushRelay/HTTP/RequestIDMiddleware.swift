import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1

/// Gives every request an id: the caller's `X-Request-Id` when it is short and plain, a new UUID
/// otherwise. The id goes into the logger's metadata (`request.id`, in place of Hummingbird's
/// `hb.request.id`) and back in the response header, so a helpdesk retry can be matched to the
/// relay's log lines.
struct RequestIDMiddleware<Context: RequestContext>: RouterMiddleware {
    static var headerName: HTTPField.Name { HTTPField.Name("X-Request-Id")! }

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let id = request.headers[Self.headerName].flatMap(Self.acceptable) ?? Self.newID()
        var context = context
        context.logger[metadataKey: "request.id"] = .string(id)
        // Hummingbird's own id for the request: one id per line, as on the fast paths' lines, which
        // never had it. (Hummingbird reads it only for `RequestContext.id`, which PushRelay does not use.)
        context.logger[metadataKey: "hb.request.id"] = nil
        var response = try await next(request, context)
        response.headers[Self.headerName] = id
        return response
    }

    /// A new request id in the form of a version 4 UUID: a random value drawn once per process
    /// plus a count, so ids are unique without drawing random bytes (two `getrandom` calls) per
    /// request. Ids need to be unique, not unpredictable: they are the caller's to see anyway.
    static func newID() -> String {
        UUID.unique().lowercasedString
    }

    /// The id of a request answered below the framework (the fast paths, a refused connection):
    /// the caller's when acceptable, as the middleware takes it, else a new one.
    static func id(for head: HTTPRequestHead) -> String {
        head.headers.first(name: headerName.rawName).flatMap(acceptable) ?? newID()
    }

    /// Letters, digits, `-`, `_` and `.`, at most 128 characters: safe to log and echo.
    static func acceptable(_ value: String) -> String? {
        guard !value.isEmpty, value.utf8.count <= 128,
            value.utf8.allSatisfy({
                $0 < 128
                    && (Character(Unicode.Scalar($0)).isLetter || Character(Unicode.Scalar($0)).isNumber || $0 == 45
                        || $0 == 95 || $0 == 46)
            })
        else { return nil }
        return value
    }
}
