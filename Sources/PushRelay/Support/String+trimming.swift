extension String {
    /// The string without every trailing repetition of `suffix` (`"https://host//"` → `"https://host"`).
    func trimmingSuffix(_ suffix: String) -> String {
        var text = self
        while text.hasSuffix(suffix) { text.removeLast(suffix.count) }
        return text
    }
}
