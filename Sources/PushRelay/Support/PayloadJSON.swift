/// The small JSON documents PushRelay sends to APNs and FCM: objects of strings, integers and
/// objects, written straight to bytes with keys sorted, so equal payloads are equal bytes.
///
/// `JSONSerialization` took about a fifth of the relay's CPU in the end-to-end benchmark, most of it
/// bridging the dictionaries; these documents need none of its generality.
indirect enum PayloadJSON: Sendable, Hashable {
    case string(String)
    case int(Int)
    case object([String: PayloadJSON])

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
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                Self.write(key, into: &output)
                output.append(UInt8(ascii: ":"))
                members[key]!.write(into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    private static func write(_ string: String, into output: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        output.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                output.append(UInt8(ascii: "\\"))
                output.append(byte)
            case 0x0A: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x00..<0x20:
                output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0x0F)])
            default:
                output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}
