extension String {
    /// The string without every trailing repetition of `suffix` (`"https://host//"` → `"https://host"`).
    func trimmingSuffix(_ suffix: String) -> String {
        var text = self
        while text.hasSuffix(suffix) { text.removeLast(suffix.count) }
        return text
    }
}

extension Substring {
    /// The text without leading and trailing spaces and tabs (HTTP's optional white space), on
    /// UTF-8 bytes: Foundation's `trimmingCharacters(in: .whitespaces)` goes through UTF-16 and
    /// showed in profiles of every authenticated request.
    func trimmingSpacesAndTabs() -> Substring {
        let utf8 = self.utf8
        let isBlank = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard let first = utf8.firstIndex(where: { !isBlank($0) }), let last = utf8.lastIndex(where: { !isBlank($0) })
        else {
            return Substring()
        }
        // Spaces and tabs are single bytes, so both indices fall on character boundaries.
        return self[first...last]
    }
}
