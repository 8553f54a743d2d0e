import Foundation
import Hummingbird
import NIOCore

/// A JSON object read from a request body, with accessors that fail with a 400 naming the field.
///
/// Hand-checked rather than `Decodable` so that every rejection says exactly which field is wrong
/// and why, in the words an integrator needs.
struct JSONBody {
    let object: [String: Any]
    /// The path of this object inside the document, for messages (`notification`, `devices[2]`).
    let path: String

    init(object: [String: Any], path: String) {
        self.object = object
        self.path = path
    }

    /// Parses `buffer` as a JSON object.
    init(buffer: ByteBuffer) throws {
        let data = Data(buffer.readableBytesView)
        guard !data.isEmpty else { throw Self.invalid("the request body is empty; expected a JSON object") }
        let value: Any
        do {
            value = try JSONSerialization.jsonObject(with: data, options: [])
        } catch {
            throw Self.invalid("the request body is not valid JSON")
        }
        guard let object = value as? [String: Any] else { throw Self.invalid("the request body must be a JSON object") }
        self.init(object: object, path: "")
    }

    func name(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    // Each accessor tries the expected type before `NSNull`: asking whether a string is an
    // `NSNull` bridges it to an `NSString` first, which cost more than the rest of the parse.

    /// A required string.
    func string(_ key: String) throws -> String {
        guard let value = object[key] else { throw Self.invalidField(name(key), "is required") }
        if let string = value as? String { return string }
        throw Self.invalidField(name(key), value is NSNull ? "is required" : "must be a string")
    }

    /// An optional string (absent or null → nil).
    func optionalString(_ key: String) throws -> String? {
        guard let value = object[key] else { return nil }
        if let string = value as? String { return string }
        if value is NSNull { return nil }
        throw Self.invalidField(name(key), "must be a string")
    }

    /// A required list of strings.
    func stringArray(_ key: String) throws -> [String] {
        let list = try array(key)
        return try list.enumerated().map { index, value in
            guard let string = value as? String else { throw Self.invalidField("\(name(key))[\(index)]", "must be a string") }
            return string
        }
    }

    /// An optional boolean (absent or null → nil).
    func optionalBool(_ key: String) throws -> Bool? {
        guard let value = object[key] else { return nil }
        if let bool = value as? Bool { return bool }
        if value is NSNull { return nil }
        throw Self.invalidField(name(key), "must be true or false")
    }

    /// A required object.
    func object(_ key: String) throws -> JSONBody {
        guard let value = object[key] else { throw Self.invalidField(name(key), "is required") }
        if let nested = value as? [String: Any] { return JSONBody(object: nested, path: name(key)) }
        throw Self.invalidField(name(key), value is NSNull ? "is required" : "must be an object")
    }

    /// A required array.
    func array(_ key: String) throws -> [Any] {
        guard let value = object[key] else { throw Self.invalidField(name(key), "is required") }
        if let array = value as? [Any] { return array }
        throw Self.invalidField(name(key), value is NSNull ? "is required" : "must be a list")
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
            throw APIError(.unsupportedMediaType, code: "unsupported_media_type", message: "Content-Type must be application/json")
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
