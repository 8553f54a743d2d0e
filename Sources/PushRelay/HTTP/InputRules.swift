import Hummingbird

/// What a value taken from a request may hold, declared once for every route (README, "Input
/// rules"). A value is checked here before anything is queued or stored, so input that PostgreSQL
/// cannot store, or that could not travel in an HTTP header or a NOTIFY line, is a 400 naming the
/// field instead of a failed statement that takes the other webhooks of its group commit with it.
enum InputRules {
    /// Most bytes of a device token (``DeviceToken/maxBytes``).
    static let maxTokenBytes = DeviceToken.maxBytes
    /// Most bytes of a ticket id (webhook `ticket_id`, `{ticket}` in read paths).
    static let maxTicketBytes = 255
    /// Most bytes of a user id (`user_id`, `{user}` in paths).
    static let maxUserBytes = 256

    /// Free text (a notification's title and body): any Unicode but U+0000, which PostgreSQL's
    /// `text` cannot hold.
    static func text(_ value: String, field: String) throws(APIError) -> String {
        guard !value.utf8.contains(0) else {
            throw JSONBody.invalidField(field, "must not contain the NUL character (\\u0000)")
        }
        return value
    }

    /// An identifier (ticket id, user id): 1 to `maxBytes` bytes with no control character (C0, DEL
    /// or C1). Identifiers travel in URL paths, NOTIFY payloads (one per line) and log metadata.
    static func identifier(_ value: String, field: String, maxBytes: Int) throws(APIError) -> String {
        guard !value.isEmpty, value.utf8.count <= maxBytes else {
            throw JSONBody.invalidField(field, "must be 1-\(maxBytes) bytes")
        }
        guard !value.unicodeScalars.contains(where: isControl) else {
            throw JSONBody.invalidField(field, "must not contain control characters (U+0000-U+001F, U+007F-U+009F)")
        }
        return value
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value <= 0x9F)
    }

    /// `0-9`, `A-Z`, `a-z`: the core of every ASCII-only value class (collapse ids, language tags,
    /// unreserved URL characters).
    static func isAlphanumericASCII(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }
}

/// Percent-decoding of path segments, in one place for every route.
enum PathSegment {
    /// The segment with each `%XX` decoded, or `nil` when a `%` is not followed by two hex digits or
    /// the decoded bytes are not UTF-8. `+` stays `+` (it means a space only in query strings).
    static func decode(_ raw: some StringProtocol) -> String? {
        let utf8 = raw.utf8
        guard utf8.contains(UInt8(ascii: "%")) else { return String(raw) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var index = utf8.startIndex
        while index != utf8.endIndex {
            let byte = utf8[index]
            index = utf8.index(after: index)
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard index != utf8.endIndex, let high = hexValue(utf8[index]) else { return nil }
            index = utf8.index(after: index)
            guard index != utf8.endIndex, let low = hexValue(utf8[index]) else { return nil }
            index = utf8.index(after: index)
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The inverse of ``decode(_:)``: every byte outside RFC 3986's unreserved set
    /// (`A-Z a-z 0-9 - . _ ~`) as `%XX`, so the value stays one segment whatever it holds.
    static func encode(_ value: String) -> String {
        guard !value.utf8.allSatisfy(isUnreserved) else { return value }
        let digits = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(value.utf8.count * 3)
        for byte in value.utf8 {
            if isUnreserved(byte) {
                bytes.append(byte)
            } else {
                bytes.append(contentsOf: [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func isUnreserved(_ byte: UInt8) -> Bool {
        InputRules.isAlphanumericASCII(byte) || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x7E
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension RequestContext {
    /// A path parameter of the matched route, percent-decoded: every route reads its parameters
    /// through here, so `{token}`, `{user}` and `{ticket}` round-trip the same way. A parameter that
    /// is not well-formed percent-encoded UTF-8, or that holds a control character, is a 400.
    func pathParameter(_ name: String) throws(APIError) -> String {
        guard let raw = parameters.get(name) else {
            throw APIError(.internalServerError, code: "internal_error", message: "the route has no parameter \(name)")
        }
        return try PathSegment.parameter(raw, name: name)
    }
}

extension PathSegment {
    /// A path parameter's value: percent-decoded UTF-8 without control characters (400 otherwise).
    static func parameter(_ raw: some StringProtocol, name: String) throws(APIError) -> String {
        guard let value = PathSegment.decode(raw) else {
            throw JSONBody.invalidField(name, "in the path must be percent-encoded UTF-8")
        }
        guard !value.unicodeScalars.contains(where: InputRules.isControl) else {
            throw JSONBody.invalidField(name, "in the path must not contain control characters")
        }
        return value
    }
}

extension InputRules {
    /// `limit` of a list: 1-500, 50 when absent; anything else is a 400 (the OpenAPI document says so).
    static func pageLimit(_ value: Substring?) throws -> Int {
        guard let value else { return 50 }
        guard value.utf8.count <= 3, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let limit = Int(value),
            (1...500).contains(limit)
        else {
            throw JSONBody.invalidField("limit", "must be an integer from 1 to 500")
        }
        return limit
    }
}

extension InputRules {
    /// Normalises and checks a token for the registry API: iOS tokens are hex of even length,
    /// 32–200 characters, stored lower-case; Android tokens are printable ASCII without spaces, at
    /// most ``InputRules/maxTokenBytes`` bytes. Returns `nil` with the reason when the token is unacceptable.
    static func deviceToken(_ token: String, platform: Platform) -> Result<String, APIError> {
        switch platform {
        case .ios:
            let count = token.utf8.count
            guard count >= 32, count <= 200, count % 2 == 0, token.utf8.allSatisfy(DeviceToken.isHex) else {
                return .failure(
                    APIError(
                        .badRequest,
                        code: "invalid_field",
                        message: "token must be an APNs token: hex, even length, 32-200 characters"
                    )
                )
            }
            return .success(token.lowercased())
        case .android:
            guard DeviceToken.isPrintable(token) else {
                return .failure(
                    APIError(
                        .badRequest,
                        code: "invalid_field",
                        message:
                            "token must be 1-\(InputRules.maxTokenBytes) bytes of printable characters without spaces"
                    )
                )
            }
            return .success(token)
        }
    }

    /// A token from a lookup's path (`…/devices/{token}`): printable, else 400; hex tokens are
    /// compared lower-case, as they are stored.
    static func deviceTokenForLookup(_ token: String) throws -> String {
        guard DeviceToken.isPrintable(token) else {
            throw JSONBody.invalidField("token", "must be printable characters without spaces")
        }
        return token.utf8.allSatisfy(DeviceToken.isHex) ? token.lowercased() : token
    }
}
