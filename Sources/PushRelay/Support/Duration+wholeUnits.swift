/// A duration in the whole units a configuration key counts in: each `XSettings+ConfigReader.swift`
/// reads `lease_seconds` with the type's own `lease` as its default, so a default exists once, in
/// the settings type.
extension Duration {
    /// Whole seconds, rounded down.
    var wholeSeconds: Int { Int(components.seconds) }
    /// Whole milliseconds, rounded down.
    var wholeMilliseconds: Int {
        Int(components.seconds) * 1000 + Int(components.attoseconds / 1_000_000_000_000_000)
    }
}
