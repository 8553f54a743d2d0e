import Hummingbird
import NIOCore
import StrictJSON

/// A JSON object read from a request body, with accessors that fail with a 400 naming the field.
///
/// Bodies are parsed by ``StrictJSON`` (RFC 8259 and nothing more: no trailing commas, comments,
/// NaN, leading zeros, invalid UTF-8, lone surrogates or duplicate names), so the relay never
/// accepts a document that another JSON parser would read differently. Fields are hand-checked
/// rather than `Decodable` so that every rejection says exactly which field is wrong and why.
struct JSONBody {
    let object: JSONObject
    /// The path of this object inside the document, for messages (`notification`, `devices[2]`).
    let path: String

    init(object: JSONObject, path: String) {
        self.object = object
        self.path = path
    }

    /// Parses `buffer` as a JSON object.
    init(buffer: ByteBuffer) throws {
        guard buffer.readableBytes > 0 else { throw Self.invalid("the request body is empty; expected a JSON object") }
        let value: JSONValue
        do {
            value = try buffer.withUnsafeReadableBytes { bytes throws(JSONParseError) in try StrictJSON.parse(bytes) }
        } catch {
            throw Self.invalid("the request body is not valid JSON: \(error.message)")
        }
        guard case .object(let object) = value else { throw Self.invalid("the request body must be a JSON object") }
        self.init(object: object, path: "")
    }

    func name(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// A required string.
    func string(_ key: String) throws -> String {
        switch object[key] {
        case .string(let string): return string
        case nil, .null: throw Self.invalidField(name(key), "is required")
        default: throw Self.invalidField(name(key), "must be a string")
        }
    }

    /// An optional string (absent or null → nil).
    func optionalString(_ key: String) throws -> String? {
        switch object[key] {
        case .string(let string): return string
        case nil, .null: return nil
        default: throw Self.invalidField(name(key), "must be a string")
        }
    }

    /// A required list of strings.
    func stringArray(_ key: String) throws -> [String] {
        let list = try array(key)
        return try list.enumerated().map { index, value in
            guard case .string(let string) = value else {
                throw Self.invalidField("\(name(key))[\(index)]", "must be a string")
            }
            return string
        }
    }

    /// An optional boolean (absent or null → nil).
    func optionalBool(_ key: String) throws -> Bool? {
        switch object[key] {
        case .bool(let bool): return bool
        case nil, .null: return nil
        default: throw Self.invalidField(name(key), "must be true or false")
        }
    }

    /// A required object.
    func object(_ key: String) throws -> JSONBody {
        switch object[key] {
        case .object(let nested): return JSONBody(object: nested, path: name(key))
        case nil, .null: throw Self.invalidField(name(key), "is required")
        default: throw Self.invalidField(name(key), "must be an object")
        }
    }

    /// A required array.
    func array(_ key: String) throws -> [JSONValue] {
        switch object[key] {
        case .array(let array): return array
        case nil, .null: throw Self.invalidField(name(key), "is required")
        default: throw Self.invalidField(name(key), "must be a list")
        }
    }

    static func invalid(_ message: String) -> APIError {
        APIError(.badRequest, code: "invalid_json", message: message)
    }

    static func invalidField(_ field: String, _ problem: String) -> APIError {
        APIError(.badRequest, code: "invalid_field", message: "\(field) \(problem)")
    }
}

extension Request {
    /// Collects the body up to the context's limit; a larger body is a 413 JSON error.
    mutating func collectJSON(context: some RequestContext) async throws -> JSONBody {
        try JSONBody(buffer: try await collectJSONBytes(context: context))
    }

    /// Checks the content type and collects the raw body (for callers that must see the exact
    /// bytes, such as a signature check).
    mutating func collectJSONBytes(context: some RequestContext) async throws -> ByteBuffer {
        if let type = headers[.contentType], !type.lowercased().hasPrefix("application/json") {
            throw APIError(
                .unsupportedMediaType,
                code: "unsupported_media_type",
                message: "Content-Type must be application/json"
            )
        }
        do {
            return try await collectBody(upTo: context.maxUploadSize)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw Self.tooLarge(context.maxUploadSize)
        } catch is NIOTooManyBytesError {
            throw Self.tooLarge(context.maxUploadSize)
        }
    }

    private static func tooLarge(_ limit: Int) -> APIError {
        APIError(.contentTooLarge, code: "payload_too_large", message: "the request body exceeds \(limit) bytes")
    }
}
