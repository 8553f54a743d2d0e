// A strict RFC 8259 JSON parser over UTF-8 bytes, with no Foundation dependency.
//
// `JSONSerialization` accepts documents RFC 8259 forbids (and silently keeps the last of duplicate
// names), bridges every value through `NSObject`, and was the largest cost on the webhook path.
// This parser accepts exactly the RFC grammar, rejects anything ambiguous (duplicate names, lone
// surrogates, invalid UTF-8) so that two parsers can never disagree about what a body means, and
// reads bytes in place with index arithmetic.

/// A JSON value parsed strictly to RFC 8259.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's text exactly as written (already checked against the RFC grammar).
    ///
    /// Kept as text so that no precision is lost and huge values (`1e999999`, a 400-digit integer) parse
    /// without trapping; a field converts it with ``int`` or ``double`` and decides what is out of range.
    /// Equality compares the text, so `1.0` and `1` are different values.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

extension JSONValue {
    public var objectValue: JSONObject? {
        guard case .object(let object) = self else { return nil }
        return object
    }

    public var arrayValue: [JSONValue]? {
        guard case .array(let array) = self else { return nil }
        return array
    }

    public var stringValue: String? {
        guard case .string(let string) = self else { return nil }
        return string
    }

    /// The number as an `Int64`, when it is written as an integer (no fraction, no exponent) that fits.
    ///
    /// `1.0` and `1e2` give nil on purpose: a field that wants an integer should not quietly accept a
    /// float spelling, and an integer too large for `Int64` must be rejected rather than rounded.
    public var int: Int64? {
        guard case .number(let text) = self else { return nil }
        // The grammar is already checked, so only these bytes can mark a non-integer.
        for byte in text.utf8 where byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            return nil
        }
        return Int64(text)
    }

    /// The number as the nearest `Double`, or nil when it is not a number or its magnitude is beyond
    /// `Double`'s range (`1e999999`), so that no caller ever sees an infinity that the document did not contain.
    public var double: Double? {
        guard case .number(let text) = self, let value = Double(text), value.isFinite else { return nil }
        return value
    }
}

/// An object's members in document order; names are unique (a duplicate name is a parse error).
///
/// Kept as an ordered list rather than a dictionary because request bodies hold a handful of members,
/// where a linear scan beats hashing, and because document order helps when echoing or logging.
/// Code that builds one by hand must keep the names unique: ``subscript(_:)`` returns the first match.
public struct JSONObject: Sendable, Equatable {
    public var members: [(name: String, value: JSONValue)]

    public init(members: [(name: String, value: JSONValue)] = []) {
        self.members = members
    }

    /// The value of the member called `name`, or nil when there is none.
    ///
    /// A linear scan: request objects are small, and the parser has already made names unique.
    public subscript(name: String) -> JSONValue? {
        for member in members where member.name == name {
            return member.value
        }
        return nil
    }

    /// Objects are equal when they have the same names with equal values, in any order: RFC 8259 objects
    /// are unordered, so `{"a":1,"b":2}` and `{"b":2,"a":1}` mean the same thing.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        let count = lhs.members.count
        guard count == rhs.members.count else { return false }
        // Fast path: the same order, which is the usual case (a document against its own re-encoding).
        var first = 0
        while first < count, lhs.members[first].name == rhs.members[first].name {
            guard lhs.members[first].value == rhs.members[first].value else { return false }
            first += 1
        }
        if first == count { return true }
        // Names are unique and the counts match, so finding every left member on the right is enough.
        if count - first <= 16 {
            for member in lhs.members[first...] {
                guard let other = rhs.members[first...].first(where: { $0.name == member.name }), other.value == member.value else {
                    return false
                }
            }
            return true
        }
        var index: [String: Int] = [:]
        index.reserveCapacity(count - first)
        for position in first..<count {
            index[rhs.members[position].name] = position
        }
        for member in lhs.members[first...] {
            guard let position = index[member.name], rhs.members[position].value == member.value else { return false }
        }
        return true
    }
}

/// Why a document is not JSON; `message` is written for an API caller and never quotes string contents
/// (they may hold secrets or notification text) — it names the problem and the byte offset only.
public struct JSONParseError: Error, Sendable, Equatable {
    /// The problem and where it is, e.g. `a trailing comma is not allowed at byte 57`.
    public var message: String
    /// The zero-based byte offset into the input where the problem was found.
    public var offset: Int

    public init(message: String, offset: Int) {
        self.message = message
        self.offset = offset
    }
}

/// The strict RFC 8259 parser.
public enum StrictJSON {
    /// The deepest nesting of arrays and objects accepted: real request bodies nest two or three levels,
    /// and a bound keeps a hostile `[[[[…` from exhausting the stack (the parser recurses once per level).
    public static let maxDepth = 64

    /// Parses exactly one JSON value (leading/trailing whitespace = space, tab, LF, CR only) from UTF-8 bytes.
    ///
    /// Everything RFC 8259 does not allow is an error, including a byte order mark, invalid UTF-8 anywhere,
    /// lone surrogate escapes and duplicate member names, so that this parser never reads a document
    /// differently from another conforming one.
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONParseError) -> JSONValue {
        guard let base = bytes.baseAddress, bytes.count > 0 else { throw Problem.emptyInput.at(0) }
        var parser = Parser(base: base, end: bytes.count)
        return try parser.parseDocument()
    }

    /// Parses exactly one JSON value from UTF-8 bytes; see ``parse(_:)-(UnsafeRawBufferPointer)``.
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        let result: Result<JSONValue, JSONParseError> = bytes.withUnsafeBytes { buffer in
            do throws(JSONParseError) {
                return .success(try parse(buffer))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}

// MARK: - Errors

/// The problems the parser reports, each phrased for an API caller.
///
/// Kept in one place so that every message has the same shape (`<problem> at byte <offset>`) and none
/// can accidentally interpolate document content.
private enum Problem: String {
    case emptyInput = "empty input: expected a JSON value"
    case byteOrderMark = "a byte order mark is not allowed"
    case unexpectedEnd = "unexpected end of input"
    case unterminatedString = "unexpected end of input inside a string"
    case trailingContent = "unexpected content after the JSON value"
    case expectedValue = "expected a JSON value"
    case invalidLiteral = "an invalid literal (expected true, false or null)"
    case trailingComma = "a trailing comma is not allowed"
    case comment = "a comment is not allowed"
    case singleQuote = "a string must be in double quotes, not single quotes"
    case unquotedName = "an object member name must be a double-quoted string"
    case expectedColon = "expected ':' after an object member name"
    case expectedArrayDelimiter = "expected ',' or ']' after an array element"
    case expectedObjectDelimiter = "expected ',' or '}' after an object member"
    case duplicateName = "duplicate object member name"
    case tooDeep = "nested deeper than 64 levels"
    case nanOrInfinity = "NaN and Infinity are not JSON numbers"
    case leadingPlus = "a number may not start with '+'"
    case leadingZero = "a number may not have leading zeros"
    case leadingDecimalPoint = "a number must have a digit before the decimal point"
    case missingFraction = "a number must have a digit after the decimal point"
    case missingExponent = "a number's exponent must have at least one digit"
    case loneMinus = "a minus sign must be followed by a digit"
    case invalidUTF8 = "invalid UTF-8"
    case controlCharacter = "an unescaped control character in a string"
    case invalidEscape = #"invalid escape in a string (allowed: \" \\ \/ \b \f \n \r \t \uXXXX)"#
    case invalidUnicodeEscape = #"invalid \u escape in a string: expected four hex digits"#
    case loneSurrogate = #"a lone UTF-16 surrogate escape (\uD800-\uDFFF without its pair) is not allowed"#

    /// The error for this problem at `offset`; out of line because errors are the cold path.
    @inline(never)
    func at(_ offset: Int) -> JSONParseError {
        JSONParseError(message: "\(rawValue) at byte \(offset)", offset: offset)
    }
}

// MARK: - Parser

private enum ASCII {
    static let quote = UInt8(ascii: "\"")
    static let backslash = UInt8(ascii: "\\")
    static let slash = UInt8(ascii: "/")
    static let apostrophe = UInt8(ascii: "'")
    static let comma = UInt8(ascii: ",")
    static let colon = UInt8(ascii: ":")
    static let openBracket = UInt8(ascii: "[")
    static let closeBracket = UInt8(ascii: "]")
    static let openBrace = UInt8(ascii: "{")
    static let closeBrace = UInt8(ascii: "}")
    static let minus = UInt8(ascii: "-")
    static let plus = UInt8(ascii: "+")
    static let dot = UInt8(ascii: ".")
    static let zero = UInt8(ascii: "0")
    static let nine = UInt8(ascii: "9")
}

/// One parse over a borrowed buffer: `base[0..<end]`, read with unchecked loads at indexes the code has
/// already compared against `end`.
private struct Parser {
    let base: UnsafeRawPointer
    let end: Int
    var index = 0

    /// Objects with more members than this check duplicates with a `Set`, so a hostile object with
    /// 100,000 members costs linear rather than quadratic time; below it a scan is cheaper than hashing.
    static let linearNameLimit = 16

    init(base: UnsafeRawPointer, end: Int) {
        self.base = base
        self.end = end
    }

    @inline(__always)
    func byte(_ offset: Int) -> UInt8 {
        base.load(fromByteOffset: offset, as: UInt8.self)
    }

    @inline(__always)
    static func isDigit(_ byte: UInt8) -> Bool {
        byte &- ASCII.zero <= 9
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while index < end {
            switch byte(index) {
            case 0x20, 0x09, 0x0A, 0x0D: index &+= 1
            default: return
            }
        }
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        if end >= 3, byte(0) == 0xEF, byte(1) == 0xBB, byte(2) == 0xBF {
            throw Problem.byteOrderMark.at(0)
        }
        skipWhitespace()
        guard index < end else { throw Problem.emptyInput.at(index) }
        let value = try parseValue(depth: 0)
        skipWhitespace()
        guard index == end else {
            throw (byte(index) == ASCII.slash ? Problem.comment : Problem.trailingContent).at(index)
        }
        return value
    }

    /// Parses the value at `index`; `depth` is the number of arrays and objects it sits inside.
    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard index < end else { throw Problem.unexpectedEnd.at(index) }
        switch byte(index) {
        case ASCII.quote:
            return .string(try parseString())
        case ASCII.openBrace:
            return try parseObject(depth: depth &+ 1)
        case ASCII.openBracket:
            return try parseArray(depth: depth &+ 1)
        case UInt8(ascii: "t"):
            try parseLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try parseLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try parseLiteral("null")
            return .null
        case ASCII.minus, ASCII.zero...ASCII.nine:
            return .number(try parseNumber())
        default:
            throw unexpectedValue(at: index)
        }
    }

    /// Names the likeliest mistake when a value was expected but `offset` does not start one.
    @inline(never)
    func unexpectedValue(at offset: Int) -> JSONParseError {
        switch byte(offset) {
        case ASCII.plus: Problem.leadingPlus.at(offset)
        case ASCII.dot: Problem.leadingDecimalPoint.at(offset)
        case UInt8(ascii: "N"), UInt8(ascii: "I"): Problem.nanOrInfinity.at(offset)
        case ASCII.slash: Problem.comment.at(offset)
        case ASCII.apostrophe: Problem.singleQuote.at(offset)
        case 0x80...: nonASCII(at: offset, otherwise: .expectedValue)
        default: Problem.expectedValue.at(offset)
        }
    }

    /// A non-ASCII byte where only ASCII may appear: say "invalid UTF-8" when it is, since that is the
    /// more useful diagnosis (a Latin-1 body, say), and `problem` otherwise.
    @inline(never)
    func nonASCII(at offset: Int, otherwise problem: Problem) -> JSONParseError {
        do {
            _ = try validateUTF8(at: offset)
            return problem.at(offset)
        } catch {
            return error
        }
    }

    mutating func parseLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard end &- index >= count else {
            // A prefix of the literal that runs into the end is a truncated document; anything else is a typo.
            for offset in 0..<(end &- index) where byte(index &+ offset) != literal.utf8Start[offset] {
                throw Problem.invalidLiteral.at(index)
            }
            throw Problem.unexpectedEnd.at(end)
        }
        for offset in 1..<count where byte(index &+ offset) != literal.utf8Start[offset] {
            throw Problem.invalidLiteral.at(index)
        }
        index &+= count
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= StrictJSON.maxDepth else { throw Problem.tooDeep.at(index) }
        index &+= 1
        skipWhitespace()
        if index < end, byte(index) == ASCII.closeBracket {
            index &+= 1
            return .array([])
        }
        var elements: [JSONValue] = []
        while true {
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < end else { throw Problem.unexpectedEnd.at(index) }
            switch byte(index) {
            case ASCII.comma:
                let comma = index
                index &+= 1
                skipWhitespace()
                if index < end, byte(index) == ASCII.closeBracket { throw Problem.trailingComma.at(comma) }
            case ASCII.closeBracket:
                index &+= 1
                return .array(elements)
            case ASCII.slash:
                throw Problem.comment.at(index)
            case 0x80...:
                throw nonASCII(at: index, otherwise: .expectedArrayDelimiter)
            default:
                throw Problem.expectedArrayDelimiter.at(index)
            }
        }
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= StrictJSON.maxDepth else { throw Problem.tooDeep.at(index) }
        index &+= 1
        skipWhitespace()
        if index < end, byte(index) == ASCII.closeBrace {
            index &+= 1
            return .object(JSONObject())
        }
        var members: [(name: String, value: JSONValue)] = []
        // Most request objects have a few members: skipping the first growth steps is measurably faster.
        members.reserveCapacity(4)
        // Filled only once the object outgrows `linearNameLimit`.
        var names = Set<String>()
        var comma: Int?
        while true {
            guard index < end else { throw Problem.unexpectedEnd.at(index) }
            let start = index
            guard byte(start) == ASCII.quote else { throw badName(at: start, afterComma: comma) }
            let name = try parseString()
            if members.count < Self.linearNameLimit {
                for member in members where member.name == name {
                    throw Problem.duplicateName.at(start)
                }
            } else {
                if names.isEmpty {
                    names.reserveCapacity(2 &* Self.linearNameLimit)
                    for member in members {
                        names.insert(member.name)
                    }
                }
                guard names.insert(name).inserted else { throw Problem.duplicateName.at(start) }
            }
            skipWhitespace()
            guard index < end else { throw Problem.unexpectedEnd.at(index) }
            guard byte(index) == ASCII.colon else {
                throw (byte(index) == ASCII.slash ? Problem.comment : Problem.expectedColon).at(index)
            }
            index &+= 1
            skipWhitespace()
            members.append((name: name, value: try parseValue(depth: depth)))
            skipWhitespace()
            guard index < end else { throw Problem.unexpectedEnd.at(index) }
            switch byte(index) {
            case ASCII.comma:
                comma = index
                index &+= 1
                skipWhitespace()
            case ASCII.closeBrace:
                index &+= 1
                return .object(JSONObject(members: members))
            case ASCII.slash:
                throw Problem.comment.at(index)
            case 0x80...:
                throw nonASCII(at: index, otherwise: .expectedObjectDelimiter)
            default:
                throw Problem.expectedObjectDelimiter.at(index)
            }
        }
    }

    /// Names the mistake when an object member name was expected at `offset` but no `"` is there.
    @inline(never)
    func badName(at offset: Int, afterComma comma: Int?) -> JSONParseError {
        switch byte(offset) {
        case ASCII.closeBrace: comma.map { Problem.trailingComma.at($0) } ?? Problem.unquotedName.at(offset)
        case ASCII.apostrophe: Problem.singleQuote.at(offset)
        case ASCII.slash: Problem.comment.at(offset)
        case 0x80...: nonASCII(at: offset, otherwise: .unquotedName)
        default: Problem.unquotedName.at(offset)
        }
    }

    // MARK: Strings

    /// Parses the string whose opening quote is at `index`.
    ///
    /// The first pass finds the closing quote eight bytes at a time and checks UTF-8, control characters
    /// and escapes; a string without escapes (nearly all of them) is then made with one copy of its bytes.
    mutating func parseString() throws(JSONParseError) -> String {
        let start = index &+ 1
        var position = start
        var escaped = false
        scan: while true {
            while position &+ 8 <= end {
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: position, as: UInt64.self))
                let special = Self.specialBytes(word)
                if special != 0 {
                    position &+= special.trailingZeroBitCount &>> 3
                    break
                }
                position &+= 8
            }
            guard position < end else { throw Problem.unterminatedString.at(end) }
            let current = byte(position)
            switch current {
            case ASCII.quote:
                break scan
            case ASCII.backslash:
                position = try validateEscape(at: position)
                escaped = true
            case 0..<0x20:
                throw Problem.controlCharacter.at(position)
            case 0x80...:
                position = try validateUTF8(at: position)
            default:
                position &+= 1
            }
        }
        index = position &+ 1
        let raw = UnsafeRawBufferPointer(start: base + start, count: position &- start)
        return escaped ? Self.unescape(raw) : String(decoding: raw, as: UTF8.self)
    }

    /// Sets the high bit of the lowest byte of `word` (little-endian) that is `"`, `\`, below 0x20 or
    /// above 0x7F. Bytes above the first such byte may be flagged spuriously (borrows), which is harmless
    /// because the caller only uses the lowest flag and then re-examines that byte.
    @inline(__always)
    static func specialBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let isQuote = (quote &- ones) & ~quote
        let isBackslash = (backslash &- ones) & ~backslash
        let isControl = (word &- ones &* 0x20) & ~word
        return (isQuote | isBackslash | isControl | word) & high
    }

    /// Checks the escape whose backslash is at `offset` and returns the offset just after it.
    func validateEscape(at offset: Int) throws(JSONParseError) -> Int {
        guard offset &+ 1 < end else { throw Problem.unterminatedString.at(end) }
        switch byte(offset &+ 1) {
        case ASCII.quote, ASCII.backslash, ASCII.slash,
            UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            return offset &+ 2
        case UInt8(ascii: "u"):
            let unit = try hex4(at: offset &+ 2, escape: offset)
            switch unit {
            case 0xD800...0xDBFF:
                // A high surrogate must be followed at once by an escaped low surrogate.
                guard offset &+ 6 < end else { throw Problem.unterminatedString.at(end) }
                guard byte(offset &+ 6) == ASCII.backslash else { throw Problem.loneSurrogate.at(offset) }
                guard offset &+ 7 < end else { throw Problem.unterminatedString.at(end) }
                guard byte(offset &+ 7) == UInt8(ascii: "u") else { throw Problem.loneSurrogate.at(offset) }
                let low = try hex4(at: offset &+ 8, escape: offset &+ 6)
                guard (0xDC00...0xDFFF).contains(low) else { throw Problem.loneSurrogate.at(offset) }
                return offset &+ 12
            case 0xDC00...0xDFFF:
                throw Problem.loneSurrogate.at(offset)
            default:
                return offset &+ 6
            }
        default:
            throw Problem.invalidEscape.at(offset)
        }
    }

    /// The value of the four hex digits at `offset`, for the `\u` escape starting at `escape`.
    func hex4(at offset: Int, escape: Int) throws(JSONParseError) -> UInt32 {
        guard offset &+ 4 <= end else {
            for position in offset..<end where Self.hexValue(byte(position)) > 0xF {
                throw Problem.invalidUnicodeEscape.at(escape)
            }
            throw Problem.unterminatedString.at(end)
        }
        var value: UInt32 = 0
        for position in offset..<(offset &+ 4) {
            let digit = Self.hexValue(byte(position))
            guard digit <= 0xF else { throw Problem.invalidUnicodeEscape.at(escape) }
            value = value &<< 4 | digit
        }
        return value
    }

    /// A hex digit's value, or 0xFF for a byte that is not one.
    @inline(__always)
    static func hexValue(_ byte: UInt8) -> UInt32 {
        switch byte {
        case ASCII.zero...ASCII.nine: UInt32(byte &- ASCII.zero)
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte &- UInt8(ascii: "a") &+ 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte &- UInt8(ascii: "A") &+ 10)
        default: 0xFF
        }
    }

    /// Checks the UTF-8 sequence whose lead byte (0x80 or above) is at `offset`, per the Unicode
    /// well-formed table (no overlong forms, no surrogates, nothing above U+10FFFF), and returns the
    /// offset just after it.
    func validateUTF8(at offset: Int) throws(JSONParseError) -> Int {
        let lead = byte(offset)
        let length: Int
        var secondLow: UInt8 = 0x80
        var secondHigh: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            secondLow = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            secondHigh = 0x9F
        case 0xF0:
            length = 4
            secondLow = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            secondHigh = 0x8F
        default: throw Problem.invalidUTF8.at(offset)
        }
        guard offset &+ length <= end else { throw Problem.invalidUTF8.at(offset) }
        let second = byte(offset &+ 1)
        guard second >= secondLow, second <= secondHigh else { throw Problem.invalidUTF8.at(offset) }
        var position = offset &+ 2
        while position < offset &+ length {
            guard byte(position) & 0xC0 == 0x80 else { throw Problem.invalidUTF8.at(offset) }
            position &+= 1
        }
        return position
    }

    /// Decodes the already-validated contents of a string that holds escapes. The result is never longer
    /// than the source (`\uXXXX` is six bytes for at most three), so it is written straight into the
    /// string's own storage.
    static func unescape(_ raw: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: raw.count) { output in
            var read = 0
            var write = 0
            let count = raw.count
            while read < count {
                let current = raw[read]
                if current != ASCII.backslash {
                    var runEnd = read &+ 1
                    while runEnd < count, raw[runEnd] != ASCII.backslash {
                        runEnd &+= 1
                    }
                    let length = runEnd &- read
                    UnsafeMutableRawPointer(output.baseAddress! + write).copyMemory(from: raw.baseAddress! + read, byteCount: length)
                    write &+= length
                    read = runEnd
                    continue
                }
                let kind = raw[read &+ 1]
                read &+= 2
                let simple: UInt8
                switch kind {
                case UInt8(ascii: "b"): simple = 0x08
                case UInt8(ascii: "f"): simple = 0x0C
                case UInt8(ascii: "n"): simple = 0x0A
                case UInt8(ascii: "r"): simple = 0x0D
                case UInt8(ascii: "t"): simple = 0x09
                case UInt8(ascii: "u"):
                    var scalar = hex4Unchecked(raw, read)
                    read &+= 4
                    if scalar >= 0xD800 {
                        if scalar <= 0xDBFF {
                            let low = hex4Unchecked(raw, read &+ 2)
                            read &+= 6
                            scalar = 0x10000 &+ ((scalar &- 0xD800) &<< 10) &+ (low &- 0xDC00)
                        }
                    }
                    write = writeUTF8(scalar, into: output, at: write)
                    continue
                default: simple = kind  // `"`, `\` and `/` stand for themselves.
                }
                output[write] = simple
                write &+= 1
            }
            return write
        }
    }

    @inline(__always)
    static func hex4Unchecked(_ raw: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
        hexValue(raw[offset]) &<< 12 | hexValue(raw[offset &+ 1]) &<< 8 | hexValue(raw[offset &+ 2]) &<< 4 | hexValue(raw[offset &+ 3])
    }

    @inline(__always)
    static func writeUTF8(_ scalar: UInt32, into output: UnsafeMutableBufferPointer<UInt8>, at offset: Int) -> Int {
        switch scalar {
        case ..<0x80:
            output[offset] = UInt8(truncatingIfNeeded: scalar)
            return offset &+ 1
        case ..<0x800:
            output[offset] = UInt8(truncatingIfNeeded: 0xC0 | scalar &>> 6)
            output[offset &+ 1] = UInt8(truncatingIfNeeded: 0x80 | scalar & 0x3F)
            return offset &+ 2
        case ..<0x10000:
            output[offset] = UInt8(truncatingIfNeeded: 0xE0 | scalar &>> 12)
            output[offset &+ 1] = UInt8(truncatingIfNeeded: 0x80 | scalar &>> 6 & 0x3F)
            output[offset &+ 2] = UInt8(truncatingIfNeeded: 0x80 | scalar & 0x3F)
            return offset &+ 3
        default:
            output[offset] = UInt8(truncatingIfNeeded: 0xF0 | scalar &>> 18)
            output[offset &+ 1] = UInt8(truncatingIfNeeded: 0x80 | scalar &>> 12 & 0x3F)
            output[offset &+ 2] = UInt8(truncatingIfNeeded: 0x80 | scalar &>> 6 & 0x3F)
            output[offset &+ 3] = UInt8(truncatingIfNeeded: 0x80 | scalar & 0x3F)
            return offset &+ 4
        }
    }

    // MARK: Numbers

    /// Parses the number at `index` to the RFC grammar `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    /// and returns its text; what follows it (a delimiter or not) is the caller's business.
    mutating func parseNumber() throws(JSONParseError) -> String {
        let start = index
        var position = index
        if byte(position) == ASCII.minus {
            position &+= 1
            guard position < end else { throw Problem.loneMinus.at(start) }
            let next = byte(position)
            if next == UInt8(ascii: "I") || next == UInt8(ascii: "N") { throw Problem.nanOrInfinity.at(start) }
            guard Self.isDigit(next) else { throw Problem.loneMinus.at(start) }
        }
        if byte(position) == ASCII.zero {
            position &+= 1
            if position < end, Self.isDigit(byte(position)) { throw Problem.leadingZero.at(start) }
        } else {
            while position < end, Self.isDigit(byte(position)) {
                position &+= 1
            }
        }
        if position < end, byte(position) == ASCII.dot {
            position &+= 1
            guard position < end, Self.isDigit(byte(position)) else { throw Problem.missingFraction.at(position) }
            while position < end, Self.isDigit(byte(position)) {
                position &+= 1
            }
        }
        if position < end, byte(position) | 0x20 == UInt8(ascii: "e") {
            position &+= 1
            if position < end, byte(position) == ASCII.plus || byte(position) == ASCII.minus {
                position &+= 1
            }
            guard position < end, Self.isDigit(byte(position)) else { throw Problem.missingExponent.at(position) }
            while position < end, Self.isDigit(byte(position)) {
                position &+= 1
            }
        }
        index = position
        return String(decoding: UnsafeRawBufferPointer(start: base + start, count: position &- start), as: UTF8.self)
    }
}
