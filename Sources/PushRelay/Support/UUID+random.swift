import Foundation

extension UUID {
    /// A version 4 UUID from the standard library's system generator. `UUID()` on Linux opens,
    /// reads and closes `/dev/urandom` for every UUID, which showed in profiles of the request path
    /// (a request id per request, an `apns-id` per push).
    static func random() -> UUID {
        var generator = SystemRandomNumberGenerator()
        var words = (generator.next() as UInt64, generator.next() as UInt64)
        return withUnsafeMutableBytes(of: &words) { bytes in
            bytes[6] = (bytes[6] & 0x0F) | 0x40  // version 4
            bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 4122 variant
            return UUID(
                uuid: (
                    bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                    bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
                )
            )
        }
    }
}

extension UUID {
    /// The lower-case 8-4-4-4-12 form (`uuidString.lowercased()`), written straight into one string
    /// instead of Foundation's formatting plus a lower-cased copy; used per request and per push.
    var lowercasedString: String {
        withUnsafeBytes(of: uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { out in
                func digit(_ value: UInt8) -> UInt8 { value < 10 ? 0x30 + value : 0x57 + value }
                var position = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        out[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    out[position] = digit(bytes[index] >> 4)
                    out[position + 1] = digit(bytes[index] & 0x0F)
                    position += 2
                }
                return position
            }
        }
    }
}
