import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// Gives every request an id: the caller's `X-Request-Id` when it is short and plain, a new UUID
/// otherwise. The id goes into the logger's metadata (`request.id`) and back in the response header,
/// so a helpdesk retry can be matched to the relay's log lines.
struct RequestIDMiddleware<Context: RequestContext>: RouterMiddleware {
    static var headerName: HTTPField.Name { HTTPField.Name("X-Request-Id")! }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let id = request.headers[Self.headerName].flatMap(Self.acceptable) ?? Self.newID()
        var context = context
        context.logger[metadataKey: "request.id"] = .string(id)
        var response = try await next(request, context)
        response.headers[Self.headerName] = id
        return response
    }

    /// A new request id in the form of a version 4 UUID: a random value drawn once per process
    /// plus a count, so ids are unique without drawing random bytes (two `getrandom` calls) per
    /// request. Ids need to be unique, not unpredictable: they are the caller's to see anyway.
    static func newID() -> String {
        let number = RequestIDs.next.add(1, ordering: .relaxed).newValue
        var (high, low) = RequestIDs.base
        low &+= number
        var bytes = (high.bigEndian, low.bigEndian)
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = (raw[6] & 0x0F) | 0x40  // version 4
            raw[8] = (raw[8] & 0x3F) | 0x80  // RFC 4122 variant
            return UUID(uuid: (raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7], raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15])).lowercasedString
        }
    }

    /// Letters, digits, `-`, `_` and `.`, at most 128 characters: safe to log and echo.
    static func acceptable(_ value: String) -> String? {
        guard !value.isEmpty, value.utf8.count <= 128,
            value.utf8.allSatisfy({ $0 < 128 && (Character(Unicode.Scalar($0)).isLetter || Character(Unicode.Scalar($0)).isNumber || $0 == 45 || $0 == 95 || $0 == 46) })
        else { return nil }
        return value
    }
}

/// The state behind ``RequestIDMiddleware/newID()``.
private enum RequestIDs {
    static let base: (UInt64, UInt64) = {
        var generator = SystemRandomNumberGenerator()
        return (generator.next(), generator.next())
    }()
    static let next = Atomic<UInt64>(0)
}
