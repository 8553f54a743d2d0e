import Foundation

/// A Swift value that can be sent to PostgreSQL as a text-format query parameter.
///
/// Parameters always travel separately from the SQL text (`$1`, `$2`, …); PushRelay never builds
/// SQL by concatenating values.
public protocol PostgresEncodable: Sendable {
    /// The value in PostgreSQL's text input format, or `nil` for SQL NULL.
    var postgresText: String? { get }
}

/// A Swift value that can be read from a text-format result column.
public protocol PostgresDecodable: Sendable {
    /// Parses PostgreSQL's text output format.
    init(postgresText text: String) throws
    /// Decodes a column that may be NULL; non-optional types throw on NULL.
    static func decodeNullable(_ text: String?) throws -> Self
}

extension PostgresDecodable {
    public static func decodeNullable(_ text: String?) throws -> Self {
        guard let text else {
            throw PostgresError(code: .decoding, message: "unexpected NULL for \(Self.self)")
        }
        return try Self(postgresText: text)
    }
}

func decodingError<T>(_ type: T.Type, _ text: String) -> PostgresError {
    PostgresError(code: .decoding, message: "cannot decode \(type) from a \(text.utf8.count)-byte value")
}

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public var postgresText: String? { self?.postgresText ?? nil }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public init(postgresText text: String) throws { self = try Wrapped(postgresText: text) }
    public static func decodeNullable(_ text: String?) throws -> Self {
        try text.map { try Wrapped(postgresText: $0) }
    }
}

extension String: PostgresEncodable, PostgresDecodable {
    public var postgresText: String? { self }
    public init(postgresText text: String) { self = text }
}

extension Substring: PostgresEncodable {
    public var postgresText: String? { String(self) }
}

extension Bool: PostgresEncodable, PostgresDecodable {
    public var postgresText: String? { self ? "t" : "f" }
    public init(postgresText text: String) throws {
        switch text {
        case "t", "true": self = true
        case "f", "false": self = false
        default: throw decodingError(Bool.self, text)
        }
    }
}

extension Int: PostgresEncodable, PostgresDecodable {
    public var postgresText: String? { String(self) }
    public init(postgresText text: String) throws {
        guard let value = Int(text) else { throw decodingError(Int.self, text) }
        self = value
    }
}

extension Int64: PostgresEncodable, PostgresDecodable {
    public var postgresText: String? { String(self) }
    public init(postgresText text: String) throws {
        guard let value = Int64(text) else { throw decodingError(Int64.self, text) }
        self = value
    }
}

extension Int32: PostgresEncodable, PostgresDecodable {
    public var postgresText: String? { String(self) }
    public init(postgresText text: String) throws {
        guard let value = Int32(text) else { throw decodingError(Int32.self, text) }
        self = value
    }
}

extension Double: PostgresEncodable, PostgresDecodable {
    public var postgresText: String? { String(self) }
    public init(postgresText text: String) throws {
        guard let value = Double(text) else { throw decodingError(Double.self, text) }
        self = value
    }
}

extension UUID: PostgresEncodable, PostgresDecodable {
    public var postgresText: String? { uuidString.lowercased() }
    public init(postgresText text: String) throws {
        guard let value = UUID(uuidString: text) else { throw decodingError(UUID.self, text) }
        self = value
    }
}

extension Data: PostgresEncodable, PostgresDecodable {
    /// bytea in hex format (`\x0a1b…`).
    public var postgresText: String? {
        var text = "\\x"
        text.reserveCapacity(2 + count * 2)
        let digits = Array("0123456789abcdef".utf8)
        var bytes = [UInt8]()
        bytes.reserveCapacity(count * 2)
        for byte in self {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0x0f)])
        }
        text += String(decoding: bytes, as: UTF8.self)
        return text
    }

    public init(postgresText text: String) throws {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else {
            throw decodingError(Data.self, text)
        }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var data = Data(capacity: (utf8.count - 2) / 2)
        var index = 2
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { throw decodingError(Data.self, text) }
            data.append(high << 4 | low)
            index += 2
        }
        self = data
    }
}

extension Date: PostgresEncodable, PostgresDecodable {
    /// ISO 8601 with microseconds in UTC, which `timestamptz` accepts.
    public var postgresText: String? {
        let seconds = timeIntervalSince1970
        let whole = seconds.rounded(.down)
        let micros = Int(((seconds - whole) * 1_000_000).rounded())
        var time = time_t(whole)
        var parts = tm()
        gmtime_r(&time, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ",
            Int(parts.tm_year) + 1900,
            Int(parts.tm_mon) + 1,
            Int(parts.tm_mday),
            Int(parts.tm_hour),
            Int(parts.tm_min),
            Int(parts.tm_sec),
            min(micros, 999_999)
        )
    }

    /// Parses `timestamptz` output as PushRelay sessions produce it (ISO DateStyle, UTC time zone):
    /// `2026-11-23 00:33:02.123456+00`.
    public init(postgresText text: String) throws {
        let utf8 = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= utf8.count else { return nil }
            var value = 0
            for c in utf8[range] {
                guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(c - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19)
        else { throw decodingError(Date.self, text) }
        var index = 19
        var fraction = 0.0
        if index < utf8.count, utf8[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            while index < utf8.count, utf8[index] >= UInt8(ascii: "0"), utf8[index] <= UInt8(ascii: "9") {
                fraction += Double(utf8[index] - UInt8(ascii: "0")) * scale
                scale /= 10
                index += 1
            }
        }
        var offsetSeconds = 0
        if index < utf8.count {
            let sign = utf8[index] == UInt8(ascii: "-") ? -1 : 1
            guard utf8[index] == UInt8(ascii: "+") || utf8[index] == UInt8(ascii: "-"),
                let hours = number(index + 1..<index + 3)
            else { throw decodingError(Date.self, text) }
            var minutes = 0
            if index + 3 < utf8.count, utf8[index + 3] == UInt8(ascii: ":"), let m = number(index + 4..<index + 6) { minutes = m }
            offsetSeconds = sign * (hours * 3600 + minutes * 60)
        }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let epoch = timegm(&parts)
        self = Date(timeIntervalSince1970: Double(epoch - offsetSeconds) + fraction)
    }
}

/// Arrays travel as PostgreSQL array literals (`{"a","b"}`), so a whole batch can be bound to one
/// parameter and expanded with `unnest($1::text[])`.
extension Array: PostgresEncodable where Element: PostgresEncodable {
    /// A one-dimensional array literal, every element quoted: `{"a","b \"c\"",NULL}`. Built as
    /// UTF-8 bytes: `"` and `\` never occur inside a multi-byte sequence, so escaping bytes is exact.
    /// Each element's bytes are copied in runs between the bytes that need a backslash, not one
    /// by one: intake encodes every webhook's texts this way.
    ///
    /// Statements pass their parameters as `any PostgresEncodable`, so this runs as unspecialized
    /// generic code: ``arrayLiteral(_:)`` has specialized copies for the element types of the busy
    /// statements, which its generic entry dispatches to.
    public var postgresText: String? { arrayLiteral(self) }
}

/// ``Swift/Array/postgresText``. The loop avoids `enumerated()`, whose generic iterator looked up
/// tuple metadata for every element.
@_specialize(where Element == String)
@_specialize(where Element == String?)
@_specialize(where Element == Int)
@_specialize(where Element == Int64)
@_specialize(where Element == Bool)
@_specialize(where Element == Date?)
func arrayLiteral<Element: PostgresEncodable>(_ elements: [Element]) -> String {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(2 + elements.count * 24)
    bytes.append(UInt8(ascii: "{"))
    for index in 0..<elements.count {
        if index > 0 { bytes.append(UInt8(ascii: ",")) }
        ArrayLiteral.append(elements[index].postgresText, to: &bytes)
    }
    bytes.append(UInt8(ascii: "}"))
    return String(decoding: bytes, as: UTF8.self)
}

/// The element writer of ``Swift/Array/postgresText``, outside the generic extension so it is
/// compiled once, for concrete types.
private enum ArrayLiteral {
    static func append(_ text: String?, to bytes: inout [UInt8]) {
        guard var value = text else {
            bytes.append(contentsOf: "NULL".utf8)
            return
        }
        let quote = UInt8(ascii: "\"")
        let backslash = UInt8(ascii: "\\")
        bytes.append(quote)
        value.withUTF8 { utf8 in
            var start = 0
            for offset in 0..<utf8.count where utf8[offset] == quote || utf8[offset] == backslash {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<offset]))
                bytes.append(backslash)
                start = offset
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(quote)
    }
}

extension Array: PostgresDecodable where Element: PostgresDecodable {
    /// Parses a one-dimensional array literal such as `{a,"b c",NULL}`.
    public init(postgresText text: String) throws {
        var scalars = Substring(text).unicodeScalars[...]
        guard scalars.first == "{", scalars.last == "}" else { throw decodingError([Element].self, text) }
        scalars = scalars.dropFirst().dropLast()
        var result: [Element] = []
        var iterator = scalars.makeIterator()
        var current = String.UnicodeScalarView()
        var quoted = false
        var wasQuoted = false
        var started = false
        func finish() throws {
            let value = String(current)
            if !wasQuoted && value == "NULL" {
                result.append(try Element.decodeNullable(nil))
            } else {
                result.append(try Element(postgresText: value))
            }
            current = String.UnicodeScalarView()
            wasQuoted = false
            started = false
        }
        while let scalar = iterator.next() {
            if quoted {
                if scalar == "\\" {
                    if let next = iterator.next() { current.append(next) }
                } else if scalar == "\"" {
                    quoted = false
                } else {
                    current.append(scalar)
                }
            } else if scalar == "\"" {
                quoted = true
                wasQuoted = true
                started = true
            } else if scalar == "," {
                try finish()
            } else {
                current.append(scalar)
                started = true
            }
        }
        if started || !result.isEmpty { try finish() }
        self = result
    }
}
