/// The small JSON documents PushRelay sends to APNs and FCM: objects of strings, integers and
/// objects, written straight to bytes with keys sorted, so equal payloads are equal bytes.
///
/// `JSONSerialization` took about a fifth of the relay's CPU in the end-to-end benchmark, most of it
/// bridging the dictionaries; these documents need none of its generality.
indirect enum PayloadJSON: Sendable {
    case string(String)
    case int(Int)
    case object(PayloadMembers<PayloadJSON>)

    /// The document as UTF-8 JSON. Strings are escaped as JSON requires (`"`, `\` and control
    /// characters); everything else, `/` and non-ASCII text included, is written as it is.
    var bytes: [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        write(into: &output)
        return output
    }

    func write(into output: inout [UInt8]) {
        switch self {
        case .string(let string):
            Self.write(string, into: &output)
        case .int(let value):
            output.append(contentsOf: String(value).utf8)
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, member) in members.sortedByKey.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.write(member.key, into: &output)
                output.append(UInt8(ascii: ":"))
                member.value.write(into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// Bytes that need no escape are copied in runs, not one by one: every push's title, body and
    /// token go through here.
    private static func write(_ string: String, into output: inout [UInt8]) {
        var string = string
        output.append(UInt8(ascii: "\""))
        string.withUTF8 { utf8 in
            var start = 0
            for offset in 0..<utf8.count {
                let byte = utf8[offset]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                output.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<offset]))
                start = offset + 1
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                    output.append(UInt8(ascii: "\\"))
                    output.append(byte)
                case 0x0A: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case 0x0D: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case 0x09: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                default:
                    output.append(contentsOf: [
                        UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                    ])
                    output.append(hexDigits[Int(byte >> 4)])
                    output.append(hexDigits[Int(byte & 0x0F)])
                }
            }
            output.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        output.append(UInt8(ascii: "\""))
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}

/// The members of a payload's object: a handful, so kept in an array in the order set (a key set
/// again replaces its value) and sorted by key when written. A dictionary cost a hash of every key
/// for each member set and read, on every push.
struct PayloadMembers<Value>: ExpressibleByDictionaryLiteral {
    private(set) var pairs: [(key: String, value: Value)] = []

    init() {}

    init(dictionaryLiteral elements: (String, Value)...) {
        pairs.reserveCapacity(elements.count)
        for (key, value) in elements { self[key] = value }
    }

    subscript(key: String) -> Value? {
        get { pairs.first { $0.key == key }?.value }
        set {
            if let index = pairs.firstIndex(where: { $0.key == key }) {
                if let newValue { pairs[index].value = newValue } else { pairs.remove(at: index) }
            } else if let newValue {
                pairs.append((key, newValue))
            }
        }
    }

    func mapValues<T>(_ transform: (Value) throws -> T) rethrows -> PayloadMembers<T> {
        var mapped = PayloadMembers<T>()
        mapped.pairs = try pairs.map { ($0.key, try transform($0.value)) }
        return mapped
    }

    /// The members in the order they are written.
    var sortedByKey: [(key: String, value: Value)] { pairs.sorted { $0.key < $1.key } }
}

extension PayloadMembers: Sendable where Value: Sendable {}
