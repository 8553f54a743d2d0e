/// Shortening push text to a provider's size limit.
enum TextFitting {
    /// `encode(text)` when it `fits`; otherwise the encoding of the longest prefix of `text`, cut at
    /// a character boundary (never inside UTF-8 or a grapheme) and ended with "…", that fits.
    /// Binary search, so a payload is encoded O(log n) times, and once when the text fits.
    static func longestFitting<Encoded>(_ text: String, encode: (String) -> Encoded, fits: (Encoded) -> Bool) -> Encoded
    {
        let whole = encode(text)
        if fits(whole) { return whole }
        let characters = Array(text)
        var low = 0
        var high = characters.count
        while low < high {
            let middle = (low + high + 1) / 2
            if fits(encode(String(characters[..<middle]) + "…")) { low = middle } else { high = middle - 1 }
        }
        return encode(String(characters[..<low]) + "…")
    }
}
