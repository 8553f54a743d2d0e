import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import Postgres

/// An error that the HTTP API reports to the caller as `{"error":{"code","message"}}`.
///
/// Handlers throw it for anything the caller can fix or should know about; ``ErrorMiddleware``
/// turns it (and every other error) into a JSON response in one place.
public struct APIError: Error, Sendable, CustomStringConvertible {
    /// The HTTP status.
    public var status: HTTPResponse.Status
    /// A stable, machine-readable code in snake case.
    public var code: String
    /// A human-readable explanation that names the problem (never a secret or a full token).
    public var message: String
    /// Extra response headers, such as `Retry-After`.
    public var headers: HTTPFields

    public init(_ status: HTTPResponse.Status, code: String, message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    public var description: String { "APIError(\(status.code) \(code)): \(message)" }

    /// The database cannot be reached; the caller should retry.
    public static func databaseUnavailable() -> APIError {
        APIError(
            .serviceUnavailable,
            code: "database_unavailable",
            message: "the database is unavailable; retry later",
            headers: [.retryAfter: "5"]
        )
    }

    /// The database answers but cannot take writes now (`cause` says why, in words safe to show).
    public static func databaseUnavailable(because cause: String) -> APIError {
        APIError(
            .serviceUnavailable,
            code: "database_unavailable",
            message: "\(cause); retry later",
            headers: [.retryAfter: "5"]
        )
    }
}

/// The JSON body of every error response.
struct ErrorBody: Codable, Sendable {
    struct Detail: Codable, Sendable {
        var code: String
        var message: String
    }
    var error: Detail
}

/// An error of a feature that has its own answer; ``APIError/from(_:logger:)`` gives it.
protocol APIErrorConvertible: Error {
    var apiError: APIError { get }
}

extension APIError {
    /// Maps any error to the API's error shape. This is the only place errors become HTTP.
    static func from(_ error: any Error, logger: Logger) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as any APIErrorConvertible:
            return error.apiError
        case let error as HTTPError:
            return APIError(
                error.status,
                code: Self.code(for: error.status),
                message: error.body ?? error.status.reasonPhrase.lowercased(),
                headers: error.headers
            )
        case let error as HTTPParserError:
            // The request's own bytes are not HTTP (a bad chunk size, a body cut short by the
            // client's close): the client's fault, and often there is no one left to answer.
            logger.debug("request body could not be read", metadata: PostgresError.metadata(error))
            return APIError(
                .badRequest,
                code: "invalid_request",
                message: "the request is not well-formed HTTP: \(error)"
            )
        case let error as PostgresError where error.isUnavailable:
            // The pool logs one warning naming the cause when the fault begins (not one per request).
            logger.debug("database unavailable", metadata: PostgresError.metadata(error))
            return .databaseUnavailable()
        default:
            logger.error("request failed", metadata: PostgresError.metadata(error))
            return APIError(
                .internalServerError,
                code: "internal_error",
                message: "the server failed to handle the request"
            )
        }
    }

    /// `404 Not Found` → `not_found`.
    static func code(for status: HTTPResponse.Status) -> String {
        let phrase = status.reasonPhrase.isEmpty ? "http_\(status.code)" : status.reasonPhrase
        return phrase.lowercased().map { $0.isLetter || $0.isNumber ? String($0) : "_" }.joined()
    }

    /// The response. A 401 or 403 for the credential closes its connection (`Connection: close`):
    /// the same credential would be refused again, and a client that keeps the connection open
    /// after a refusal holds a place of `http.max_connections` it does not use. A webhook's bad
    /// signature does not: the helpdesk's next webhook on that connection may be signed well.
    func response() -> Response {
        var headers = self.headers
        headers[.contentType] = "application/json; charset=utf-8"
        if status == .unauthorized || status == .forbidden, code != "invalid_signature" {
            headers[.connection] = "close"
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    /// The response body, `{"error":{"code","message"}}`.
    var body: ByteBuffer {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return ByteBuffer(bytes: (try? encoder.encode(ErrorBody(error: .init(code: code, message: message)))) ?? Data())
    }
}
