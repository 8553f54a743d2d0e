import Foundation
import Synchronization

extension UUID {
    /// A version 4 UUID unique within this process and, with overwhelming likelihood, across
    /// processes: a random value drawn once per process plus a count, so no random bytes are drawn
    /// (two `getrandom` system calls) per id. For ids that must be unique, not unpredictable: request
    /// ids and `apns-id`s, which their receivers see anyway.
    static func unique() -> UUID {
        let number = UniqueIDs.next.add(1, ordering: .relaxed).newValue
        var (high, low) = UniqueIDs.base
        low &+= number
        var bytes = (high.bigEndian, low.bigEndian)
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = (raw[6] & 0x0F) | 0x40  // version 4
            raw[8] = (raw[8] & 0x3F) | 0x80  // RFC 4122 variant
            return UUID(
                uuid: (
                    raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7], raw[8], raw[9], raw[10], raw[11],
                    raw[12], raw[13], raw[14],
                    raw[15]
                )
            )
        }
    }
}

/// The state behind ``Foundation/UUID/unique()``.
private enum UniqueIDs {
    static let base: (UInt64, UInt64) = {
        var generator = SystemRandomNumberGenerator()
        return (generator.next(), generator.next())
    }()
    static let next = Atomic<UInt64>(0)
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
