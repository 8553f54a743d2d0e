import HTTPTypes
import Logging
import NIOCore
import NIOHTTP1

/// A request kind answered on the connection's event loop, right behind the HTTP/1.1 decoder,
/// without the router, the middleware or a task (``WebhookShortcut``, ``UnreadPollShortcut``).
/// Its handler passes on everything it does not take, unchanged, so the framework answers it.
struct FastPath: Sendable {
    /// The connection's handler, given the connection's deadline.
    let makeHandler: @Sendable (ConnectionDeadline) -> any ChannelHandler
}

/// What the fast paths share, so that they read requests and write answers as the framework's
/// path does: header names in any case, routes exactly as written, the `X-Request-Id`, `Date` and
/// `Server` headers, and the request log line.
enum FastPathRequest {
    /// Whether a header's name is `lowercased`, in any case.
    static func isNamed(_ name: String, _ lowercased: StaticString) -> Bool {
        var utf8 = name.utf8.makeIterator()
        let expected = UnsafeBufferPointer(start: lowercased.utf8Start, count: lowercased.utf8CodeUnitCount)
        for byte in expected {
            guard let next = utf8.next() else { return false }
            if next != byte, !(next >= 0x41 && next <= 0x5A && next + 0x20 == byte) { return false }
        }
        return utf8.next() == nil
    }

    /// The raw parameters of `uri` when it is `pattern` exactly as written: the same number of
    /// `/`-separated segments, each literal segment equal, each parameter (`nil`) not empty, and
    /// no query or fragment; `nil` for any other target.
    static func parameters(_ uri: String, _ pattern: [StaticString?]) -> [Substring]? {
        guard !uri.utf8.contains(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) else { return nil }
        let parts = uri.utf8.split(
            separator: UInt8(ascii: "/"),
            maxSplits: pattern.count + 1,
            omittingEmptySubsequences: false
        )
        guard parts.count == pattern.count + 1, parts[0].isEmpty else { return nil }
        var parameters: [Substring] = []
        for (part, segment) in zip(parts.dropFirst(), pattern) {
            if let literal = segment {
                guard
                    part.elementsEqual(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
                else { return nil }
            } else {
                guard !part.isEmpty else { return nil }
                parameters.append(Substring(part))
            }
        }
        return parameters
    }

    /// Adds the headers every answer carries, as ``RequestIDMiddleware`` and the server add them.
    static func addCommonHeaders(_ headers: inout HTTPHeaders, requestID: String, serverName: String) {
        headers.add(name: RequestIDMiddleware<AppRequestContext>.headerName.rawName, value: requestID)
        headers.add(name: "Date", value: HTTPDate.now())
        headers.add(name: "Server", value: serverName)
    }

    /// The request log line ``RequestLogMiddleware`` writes, for a route already redacted.
    static func log(_ logger: Logger, requestID: String, method: String, route: String, status: Int, elapsed: Duration)
    {
        guard logger.logLevel <= .info else { return }
        var logger = logger
        logger[metadataKey: "request.id"] = .string(requestID)
        RequestLogMiddleware<AppRequestContext>.log(
            logger,
            method: method,
            route: route,
            status: status,
            elapsed: elapsed
        )
    }

    /// A route's parameter as the request log shows it.
    static func redacted(_ name: String, _ value: String) -> String {
        RequestLogMiddleware<AppRequestContext>.redacted(name: name, value: value)
    }
}
