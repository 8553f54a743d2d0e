import StrictJSON
import TestSupport
import Testing

@Suite("Strict RFC 8259 JSON parsing")
struct StrictJSONTests {
    /// An invalid document and a phrase its error message must contain.
    struct InvalidJSONCase: Sendable, CustomTestStringConvertible {
        let bytes: [UInt8]
        let phrase: String
        var testDescription: String { "\(bytes.count) bytes → \(phrase)" }

        init(_ text: String, _ phrase: String) {
            self.bytes = Array(text.utf8)
            self.phrase = phrase
        }

        init(bytes: [UInt8], _ phrase: String) {
            self.bytes = bytes
            self.phrase = phrase
        }
    }

    static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try StrictJSON.parse(Array(text.utf8))
    }

    /// The error for `bytes`, or nil when they parse.
    static func error(_ bytes: [UInt8]) -> JSONParseError? {
        do {
            _ = try StrictJSON.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    // MARK: Valid documents

    @Test("a nested document parses to the expected values, keeping member order")
    func nestedDocument() throws {
        let value = try Self.parse(#" {"a": [1, true, false, null, {"b": []}], "c": {}, "d": "x"} "#)
        let expected = JSONValue.object(
            JSONObject(members: [
                ("a", .array([.number("1"), .bool(true), .bool(false), .null, .object(JSONObject(members: [("b", .array([]))]))])),
                ("c", .object(JSONObject())),
                ("d", .string("x")),
            ])
        )
        #expect(value == expected)
        guard case .object(let object) = value else {
            Issue.record("expected an object")
            return
        }
        #expect(object.members.map(\.name) == ["a", "c", "d"])
        #expect(object["d"] == .string("x"))
        #expect(object["missing"] == nil)
    }

    @Test("every scalar kind parses at the top level, with any of the four whitespace bytes around it")
    func topLevelScalars() throws {
        #expect(try Self.parse(" \t\r\ntrue\n") == .bool(true))
        #expect(try Self.parse("false") == .bool(false))
        #expect(try Self.parse("null") == .null)
        #expect(try Self.parse("-12") == .number("-12"))
        #expect(try Self.parse(#""""#) == .string(""))
    }

    @Test("all short escapes and \\u escapes (either hex case) decode")
    func escapes() throws {
        let value = try Self.parse(#""a\"b\\c\/d\be\ff\ng\rh\ti\u0041\u00e9\u00E9\u20AC\uffff""#)
        #expect(value == .string("a\"b\\c/d\u{8}e\u{C}f\ng\rh\ti" + "A\u{E9}\u{E9}\u{20AC}\u{FFFF}"))
    }

    @Test("a surrogate pair escape combines into one non-BMP scalar")
    func surrogatePair() throws {
        let value = try Self.parse(#"["\uD83D\uDE00", "x\ud83d\ude00y", "\uDBFF\uDFFF"]"#)
        #expect(value == .array([.string("😀"), .string("x😀y"), .string("\u{10FFFF}")]))
        guard case .array(let items) = value, case .string(let first) = items[0] else {
            Issue.record("expected an array of strings")
            return
        }
        #expect(Array(first.utf8) == [0xF0, 0x9F, 0x98, 0x80])
    }

    @Test("\\u0000 is legal JSON and decodes to U+0000")
    func escapedNUL() throws {
        let value = try Self.parse(#"{"a\u0000b": "\u0000"}"#)
        guard case .object(let object) = value else {
            Issue.record("expected an object")
            return
        }
        #expect(object.members.first?.name.utf8.elementsEqual([0x61, 0x00, 0x62]) == true)
        #expect(object["a\u{0}b"] == .string("\u{0}"))
    }

    @Test("raw multi-byte UTF-8 and DEL pass through unchanged, beside escapes and without them")
    func rawUTF8() throws {
        let text = "héllo \u{7F} € 😀 日本語 \u{10FFFF}"
        #expect(try Self.parse("\"\(text)\"") == .string(text))
        #expect(try Self.parse("\"\(text)\\n\(text)\"") == .string(text + "\n" + text))
    }

    @Test(
        "numbers that follow the RFC grammar keep their exact text",
        arguments: [
            "0", "-0", "1", "-1", "10", "1234567890", "0.5", "-0.5", "1.25", "1E+2", "1e2", "1e-2", "0.5e-3", "-0E0", "0e+0",
            "9223372036854775808", "1e999999", String(repeating: "9", count: 400),
        ]
    )
    func validNumbers(text: String) throws {
        #expect(try Self.parse(text) == .number(text))
        #expect(try Self.parse("[\(text)]") == .array([.number(text)]))
    }

    @Test("int reads only integers without fraction or exponent that fit Int64")
    func intHelper() throws {
        #expect(try Self.parse("0").int == 0)
        #expect(try Self.parse("-0").int == 0)
        #expect(try Self.parse("42").int == 42)
        #expect(try Self.parse("9223372036854775807").int == Int64.max)
        #expect(try Self.parse("-9223372036854775808").int == Int64.min)
        #expect(try Self.parse("9223372036854775808").int == nil)
        #expect(try Self.parse(String(repeating: "9", count: 400)).int == nil)
        #expect(try Self.parse("1.0").int == nil)
        #expect(try Self.parse("1e2").int == nil)
        #expect(try Self.parse(#""1""#).int == nil)
    }

    @Test("double reads any finite number and gives nil beyond Double's range")
    func doubleHelper() throws {
        #expect(try Self.parse("0.5e-3").double == 0.0005)
        #expect(try Self.parse("-1E+2").double == -100)
        #expect(try Self.parse("42").double == 42)
        #expect(try Self.parse("1e999999").double == nil)
        #expect(try Self.parse("-1e999999").double == nil)
        #expect(try Self.parse("1e-999999").double == 0)
        #expect(try Self.parse("true").double == nil)
    }

    @Test("objects compare equal regardless of member order, and not when a value differs")
    func objectEquality() throws {
        #expect(try Self.parse(#"{"a":1,"b":[2],"c":null}"#) == Self.parse(#"{"c":null,"a":1,"b":[2]}"#))
        #expect(try Self.parse(#"{"a":1,"b":2}"#) != Self.parse(#"{"b":2,"a":3}"#))
        #expect(try Self.parse(#"{"a":1}"#) != Self.parse(#"{"a":1,"b":2}"#))
        let names = (0..<40).map { "\"k\($0)\":\($0)" }
        #expect(try Self.parse("{" + names.joined(separator: ",") + "}") == Self.parse("{" + names.reversed().joined(separator: ",") + "}"))
    }

    @Test("the raw-buffer entry point parses the same bytes, and an empty buffer without a base address is empty input")
    func rawBuffer() throws {
        let bytes = Array(#"{"k":["v"]}"#.utf8)
        let value = try bytes.withUnsafeBytes { buffer throws(JSONParseError) in try StrictJSON.parse(buffer) }
        #expect(value == .object(JSONObject(members: [("k", .array([.string("v")]))])))
        #expect(throws: JSONParseError(message: "empty input: expected a JSON value at byte 0", offset: 0)) {
            try StrictJSON.parse(UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    @Test("a bulk token list of 10,000 long strings parses in order")
    func tokenList() throws {
        let tokens = (0..<10_000).map { String(repeating: "\($0 % 10)f", count: 32) + "\($0)" }
        let value = try Self.parse(#"{"tokens":["# + tokens.map { "\"\($0)\"" }.joined(separator: ",") + "]}")
        guard case .object(let object) = value, case .array(let items) = object["tokens"] else {
            Issue.record("expected {tokens: [...]}")
            return
        }
        #expect(items == tokens.map { .string($0) })
    }

    // MARK: Invalid documents

    @Test(
        "each kind of non-JSON is rejected with a message naming the problem",
        arguments: [
            InvalidJSONCase("[1,2,]", "a trailing comma is not allowed"),
            InvalidJSONCase(#"{"a":1 , }"#, "a trailing comma is not allowed"),
            InvalidJSONCase("[1, // note\n2]", "a comment is not allowed"),
            InvalidJSONCase("/* c */ 1", "a comment is not allowed"),
            InvalidJSONCase(#"{"a":1}// c"#, "a comment is not allowed"),
            InvalidJSONCase(#"{"a"/**/:1}"#, "a comment is not allowed"),
            InvalidJSONCase("['a']", "double quotes"),
            InvalidJSONCase("{'a':1}", "double quotes"),
            InvalidJSONCase("{a:1}", "an object member name must be a double-quoted string"),
            InvalidJSONCase("{1:1}", "an object member name must be a double-quoted string"),
            InvalidJSONCase("NaN", "NaN and Infinity are not JSON numbers"),
            InvalidJSONCase("[Infinity]", "NaN and Infinity are not JSON numbers"),
            InvalidJSONCase("-Infinity", "NaN and Infinity are not JSON numbers"),
            InvalidJSONCase("+1", "a number may not start with '+'"),
            InvalidJSONCase("01", "a number may not have leading zeros"),
            InvalidJSONCase("-01", "a number may not have leading zeros"),
            InvalidJSONCase("[00]", "a number may not have leading zeros"),
            InvalidJSONCase("1.", "a number must have a digit after the decimal point"),
            InvalidJSONCase("1.e5", "a number must have a digit after the decimal point"),
            InvalidJSONCase(".5", "a number must have a digit before the decimal point"),
            InvalidJSONCase("1e", "exponent must have at least one digit"),
            InvalidJSONCase("[1e+]", "exponent must have at least one digit"),
            InvalidJSONCase("-", "a minus sign must be followed by a digit"),
            InvalidJSONCase("[-a]", "a minus sign must be followed by a digit"),
            InvalidJSONCase("0x10", "unexpected content after the JSON value"),
            InvalidJSONCase("\"a\u{1}b\"", "an unescaped control character in a string"),
            InvalidJSONCase("\"a\nb\"", "an unescaped control character in a string"),
            InvalidJSONCase("\"\t\"", "an unescaped control character in a string"),
            InvalidJSONCase("\"a long string, past the first 8-byte word: \u{1F}\"", "an unescaped control character in a string"),
            InvalidJSONCase(#""\x""#, "invalid escape"),
            InvalidJSONCase(#""\U0041""#, "invalid escape"),
            InvalidJSONCase(#""\'""#, "invalid escape"),
            InvalidJSONCase(#""\u12G4""#, "invalid \\u escape"),
            InvalidJSONCase(#""\uD800""#, "a lone UTF-16 surrogate escape"),
            InvalidJSONCase(#""\ud800x""#, "a lone UTF-16 surrogate escape"),
            InvalidJSONCase(#""\uDC00\uD800""#, "a lone UTF-16 surrogate escape"),
            InvalidJSONCase(#""\uD800\u0041""#, "a lone UTF-16 surrogate escape"),
            InvalidJSONCase(#""\uD800\uD800""#, "a lone UTF-16 surrogate escape"),
            InvalidJSONCase(#""\uD800\n""#, "a lone UTF-16 surrogate escape"),
            InvalidJSONCase(#"{"a":1,"a":2}"#, "duplicate object member name"),
            InvalidJSONCase(#"{"a":{"b":1,"b":1}}"#, "duplicate object member name"),
            InvalidJSONCase("", "empty input"),
            InvalidJSONCase(" \n\t\r", "empty input"),
            InvalidJSONCase("[1", "unexpected end of input"),
            InvalidJSONCase(#"{"a":"#, "unexpected end of input"),
            InvalidJSONCase(#"{"a""#, "unexpected end of input"),
            InvalidJSONCase(#""abc"#, "unexpected end of input"),
            InvalidJSONCase(#""\u00"#, "unexpected end of input"),
            InvalidJSONCase("tru", "unexpected end of input"),
            InvalidJSONCase("1 2", "unexpected content after the JSON value"),
            InvalidJSONCase("{}{}", "unexpected content after the JSON value"),
            InvalidJSONCase("null\u{0}", "unexpected content after the JSON value"),
            InvalidJSONCase("True", "expected a JSON value"),
            InvalidJSONCase("nul1", "an invalid literal"),
            InvalidJSONCase("[1 2]", "expected ',' or ']'"),
            InvalidJSONCase(#"{"a":1 "b":2}"#, "expected ',' or '}'"),
            InvalidJSONCase(#"{"a" 1}"#, "expected ':'"),
            InvalidJSONCase("[,1]", "expected a JSON value"),
            InvalidJSONCase("\u{A0}1", "expected a JSON value"),
            InvalidJSONCase("\u{FEFF}{}", "a byte order mark is not allowed"),
            InvalidJSONCase(bytes: [0x22, 0xC0, 0xAF, 0x22], "invalid UTF-8"),  // overlong "/"
            InvalidJSONCase(bytes: [0x22, 0xE0, 0x80, 0xAF, 0x22], "invalid UTF-8"),  // overlong, three bytes
            InvalidJSONCase(bytes: [0x22, 0xF0, 0x80, 0x80, 0xAF, 0x22], "invalid UTF-8"),  // overlong, four bytes
            InvalidJSONCase(bytes: [0x22, 0xED, 0xA0, 0x80, 0x22], "invalid UTF-8"),  // encoded U+D800
            InvalidJSONCase(bytes: [0x22, 0xED, 0xBF, 0xBF, 0x22], "invalid UTF-8"),  // encoded U+DFFF
            InvalidJSONCase(bytes: [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], "invalid UTF-8"),  // U+110000
            InvalidJSONCase(bytes: [0x22, 0xF5, 0x80, 0x80, 0x80, 0x22], "invalid UTF-8"),
            InvalidJSONCase(bytes: [0x22, 0xE2, 0x82, 0x22], "invalid UTF-8"),  // truncated before the quote
            InvalidJSONCase(bytes: [0x22, 0xF0, 0x9F, 0x98], "invalid UTF-8"),  // truncated at the end
            InvalidJSONCase(bytes: [0x22, 0x80, 0x22], "invalid UTF-8"),  // stray continuation byte
            InvalidJSONCase(bytes: [0x22, 0x61, 0xBF, 0x61, 0x22], "invalid UTF-8"),
            InvalidJSONCase(bytes: [0x22, 0xC3, 0x41, 0x22], "invalid UTF-8"),  // lead byte without its continuation
            InvalidJSONCase(bytes: [0x22, 0xFF, 0x22], "invalid UTF-8"),
            InvalidJSONCase(bytes: [0x22] + Array("a long string, past the first 8-byte word".utf8) + [0xED, 0xB0, 0x80, 0x22], "invalid UTF-8"),
            InvalidJSONCase(bytes: [0xE9], "invalid UTF-8"),  // Latin-1 outside a string
            InvalidJSONCase(bytes: [0x5B, 0x31, 0xC0], "invalid UTF-8"),
            InvalidJSONCase(bytes: [0x7B, 0xFE, 0x7D], "invalid UTF-8"),
        ]
    )
    func rejects(_ invalid: InvalidJSONCase) throws {
        let error = try #require(Self.error(invalid.bytes))
        #expect(error.message.contains(invalid.phrase), "\(error.message)")
        #expect(error.message.hasSuffix(" at byte \(error.offset)"))
        #expect((0...invalid.bytes.count).contains(error.offset))
    }

    @Test("errors give the offset of the offending byte")
    func offsets() {
        #expect(Self.error(Array("[1, 2,\n ]".utf8)) == JSONParseError(message: "a trailing comma is not allowed at byte 5", offset: 5))
        #expect(Self.error(Array(#"{"a":1,"b":2,"a":3}"#.utf8))?.offset == 13)
        #expect(Self.error(Array(#"["ok", "\q"]"#.utf8))?.offset == 8)
        #expect(Self.error([0x5B, 0x22, 0x61, 0xED, 0xA0, 0x80, 0x22, 0x5D]) == JSONParseError(message: "invalid UTF-8 at byte 3", offset: 3))
        #expect(Self.error(Array("[1]  x".utf8))?.offset == 5)
    }

    @Test("error messages never quote the document's strings")
    func messagesHideContent() throws {
        let secret = "hunter2-secret"
        let documents = [
            "{\"\(secret)\":\"\(secret)\u{1}\"}",
            "{\"\(secret)\":1,\"\(secret)\":2}",
            "[\"\(secret)\\q\"]",
            "[\"\(secret)\\uD800\(secret)\"]",
            "[\"\(secret)\"",
            "{\"a\":\"\(secret)\" \(secret)}",
            "\(secret)",
        ]
        for document in documents {
            let error = try #require(Self.error(Array(document.utf8)))
            #expect(!error.message.contains(secret), "\(error.message)")
            #expect(!error.message.contains("hunter"))
        }
    }

    @Test("64 levels of nesting parse and 65 are rejected, counting arrays and objects together")
    func depthLimit() throws {
        #expect(StrictJSON.maxDepth == 64)
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(throws: Never.self) { try Self.parse(ok) }
        let tooDeep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(Self.error(Array(tooDeep.utf8)) == JSONParseError(message: "nested deeper than 64 levels at byte 64", offset: 64))
        let mixed = String(repeating: #"{"a":["#, count: 33) + String(repeating: "]}", count: 33)
        #expect(Self.error(Array(mixed.utf8))?.message.contains("nested deeper than 64 levels") == true)
        let mixedOK = String(repeating: #"{"a":["#, count: 32) + String(repeating: "]}", count: 32)
        #expect(throws: Never.self) { try Self.parse(mixedOK) }
    }

    @Test("names that are canonically equivalent count as duplicates, since member lookup uses String equality")
    func canonicallyEquivalentNames() {
        let document = "{\"\u{E9}\":1,\"e\u{301}\":2}"
        #expect(Self.error(Array(document.utf8))?.message.contains("duplicate object member name") == true)
    }

    @Test("1,000,000 opening brackets fail cleanly with the depth error, not a stack overflow")
    func millionBrackets() {
        let brackets = [UInt8](repeating: UInt8(ascii: "["), count: 1_000_000)
        #expect(Self.error(brackets)?.message == "nested deeper than 64 levels at byte 64")
        let objects = Array(String(repeating: #"{"a":"#, count: 200_000).utf8)
        #expect(Self.error(objects)?.message.contains("nested deeper than 64 levels") == true)
    }

    @Test("an object with 100,000 members parses, and a duplicate among them is found")
    func largeObject() throws {
        let members = (0..<100_000).map { "\"member\($0)\":\($0)" }
        let value = try Self.parse("{" + members.joined(separator: ",") + "}")
        guard case .object(let object) = value else {
            Issue.record("expected an object")
            return
        }
        #expect(object.members.count == 100_000)
        #expect(object["member99999"] == .number("99999"))
        let duplicate = "{" + members.joined(separator: ",") + ",\"member17\":0}"
        #expect(Self.error(Array(duplicate.utf8))?.message.contains("duplicate object member name") == true)
        // The seventeenth name is the first one checked against the set rather than by scanning.
        let early = "{" + members.prefix(16).joined(separator: ",") + ",\"member3\":0}"
        #expect(Self.error(Array(early.utf8))?.message.contains("duplicate object member name") == true)
    }

    // MARK: Property tests

    @Test("random values survive a round trip through a serializer that varies escapes and whitespace")
    func roundTrip() throws {
        var random = SeededGenerator(state: 0x5EED_1234)
        for _ in 0..<2_000 {
            let value = Self.randomValue(depth: 0, &random)
            var bytes: [UInt8] = []
            Self.serialize(value, into: &bytes, &random)
            let parsed = try StrictJSON.parse(bytes)
            #expect(parsed == value)
            // Swift's String equality is canonical equivalence; compare the exact scalars as well.
            var expected: [UInt8] = []
            var actual: [UInt8] = []
            Self.canonical(value, into: &expected)
            Self.canonical(parsed, into: &actual)
            #expect(actual == expected)
        }
    }

    @Test("corrupted documents either parse or throw an in-range error, never trap")
    func corruptionNeverTraps() {
        var random = SeededGenerator(state: 42)
        let alphabet = Array(#"{}[]",:\/ -+.eE0123456789abcdefnrtu"#.utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xBF, 0xC2, 0xE0, 0xED, 0xF0, 0xF4, 0xFF]
        for _ in 0..<3_000 {
            var bytes: [UInt8] = []
            Self.serialize(Self.randomValue(depth: 0, &random), into: &bytes, &random)
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let position = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: bytes[position] = alphabet.randomElement(using: &random)!
                case 1: bytes.insert(alphabet.randomElement(using: &random)!, at: position)
                default: bytes.removeSubrange(position...)
                }
                if bytes.isEmpty { break }
            }
            if let error = Self.error(bytes) {
                #expect((0...bytes.count).contains(error.offset))
            }
        }
    }

    // MARK: Generator and serializer

    static func randomValue(depth: Int, _ random: inout SeededGenerator) -> JSONValue {
        let kinds = depth < 4 ? 7 : 5
        switch Int.random(in: 0..<kinds, using: &random) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &random))
        case 2: return .number(randomNumber(&random))
        case 3, 4: return .string(randomString(&random))
        case 5: return .array((0..<Int.random(in: 0...5, using: &random)).map { _ in randomValue(depth: depth + 1, &random) })
        default:
            var members: [(name: String, value: JSONValue)] = []
            // Sometimes past the 16-member threshold, so the set-based duplicate check is exercised too.
            let count = Int.random(in: 0...10, using: &random) == 0 ? Int.random(in: 17...40, using: &random) : Int.random(in: 0...5, using: &random)
            while members.count < count {
                let name = randomString(&random)
                if members.contains(where: { $0.name == name }) { continue }
                members.append((name, randomValue(depth: depth + 1, &random)))
            }
            return .object(JSONObject(members: members))
        }
    }

    static func randomNumber(_ random: inout SeededGenerator) -> String {
        func digits(_ count: Int, _ random: inout SeededGenerator) -> String {
            String((0..<count).map { _ in Character(String(Int.random(in: 0...9, using: &random))) })
        }
        var text = Bool.random(using: &random) ? "-" : ""
        if Bool.random(using: &random) {
            text += "0"
        } else {
            text += String(Int.random(in: 1...9, using: &random)) + digits(Int.random(in: 0...25, using: &random), &random)
        }
        if Bool.random(using: &random) { text += "." + digits(Int.random(in: 1...8, using: &random), &random) }
        if Bool.random(using: &random) {
            text += ["e", "E"].randomElement(using: &random)! + ["", "+", "-"].randomElement(using: &random)!
            text += digits(Int.random(in: 1...4, using: &random), &random)
        }
        return text
    }

    static func randomString(_ random: inout SeededGenerator) -> String {
        let pools: [ClosedRange<UInt32>] = [
            0x20...0x7E, 0x20...0x7E, 0x20...0x7E, 0x00...0x1F, 0x22...0x22, 0x5C...0x5C, 0x7F...0x7F,
            0x80...0x7FF, 0x800...0xD7FF, 0xE000...0xFFFF, 0x10000...0x10FFFF, 0x1F600...0x1F64F,
        ]
        var scalars = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...24, using: &random) {
            let pool = pools.randomElement(using: &random)!
            scalars.append(Unicode.Scalar(UInt32.random(in: pool, using: &random))!)
        }
        return String(scalars)
    }

    /// Writes `value` as JSON, choosing at random between raw and escaped forms and adding whitespace.
    static func serialize(_ value: JSONValue, into out: inout [UInt8], _ random: inout SeededGenerator) {
        func space(_ random: inout SeededGenerator) {
            for _ in 0..<Int.random(in: 0...2, using: &random) {
                out.append([0x20, 0x09, 0x0A, 0x0D].randomElement(using: &random)!)
            }
        }
        space(&random)
        switch value {
        case .null: out += Array("null".utf8)
        case .bool(let bool): out += Array((bool ? "true" : "false").utf8)
        case .number(let text): out += Array(text.utf8)
        case .string(let string): serializeString(string, into: &out, &random)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                serialize(item, into: &out, &random)
            }
            space(&random)
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (index, member) in object.members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                space(&random)
                serializeString(member.name, into: &out, &random)
                space(&random)
                out.append(UInt8(ascii: ":"))
                serialize(member.value, into: &out, &random)
            }
            space(&random)
            out.append(UInt8(ascii: "}"))
        }
        space(&random)
    }

    static func serializeString(_ string: String, into out: inout [UInt8], _ random: inout SeededGenerator) {
        func hex(_ unit: UInt32, _ random: inout SeededGenerator) {
            let digits = Array((Bool.random(using: &random) ? "0123456789abcdef" : "0123456789ABCDEF").utf8)
            out += [UInt8(ascii: "\\"), UInt8(ascii: "u")]
            for shift in stride(from: 12, through: 0, by: -4) {
                out.append(digits[Int(unit >> UInt32(shift) & 0xF)])
            }
        }
        out.append(UInt8(ascii: "\""))
        for scalar in string.unicodeScalars {
            let short: [UInt32: Character] = [0x22: "\"", 0x5C: "\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"]
            let mustEscape = scalar.value < 0x20 || scalar == "\"" || scalar == "\\"
            if let letter = short[scalar.value], mustEscape || Bool.random(using: &random) {
                out += [UInt8(ascii: "\\"), UInt8(ascii: letter.unicodeScalars.first!)]
            } else if mustEscape || Int.random(in: 0..<4, using: &random) == 0 {
                if scalar.value >= 0x10000 {
                    let offset = scalar.value - 0x10000
                    hex(0xD800 + offset >> 10, &random)
                    hex(0xDC00 + offset & 0x3FF, &random)
                } else {
                    hex(scalar.value, &random)
                }
            } else {
                out += Array(String(scalar).utf8)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// One fixed spelling of `value` (members in order, raw UTF-8), for comparing scalars exactly.
    static func canonical(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: out += Array("null".utf8)
        case .bool(let bool): out += Array((bool ? "true" : "false").utf8)
        case .number(let text): out += Array(text.utf8)
        case .string(let string): out += [UInt8(ascii: "\"")] + Array(string.utf8) + [UInt8(ascii: "\"")]
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for item in items {
                canonical(item, into: &out)
                out.append(UInt8(ascii: ","))
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for member in object.members {
                canonical(.string(member.name), into: &out)
                out.append(UInt8(ascii: ":"))
                canonical(member.value, into: &out)
                out.append(UInt8(ascii: ","))
            }
            out.append(UInt8(ascii: "}"))
        }
    }
}
