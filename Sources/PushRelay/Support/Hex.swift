/// Lower-case hexadecimal digits of bytes, written straight into UTF-8 (two per byte).
enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    static func append(_ bytes: some Sequence<UInt8>, to output: inout [UInt8]) {
        for byte in bytes {
            output.append(digits[Int(byte >> 4)])
            output.append(digits[Int(byte & 0x0F)])
        }
    }
}
