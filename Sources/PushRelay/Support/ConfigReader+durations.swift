import Configuration

/// Durations read from keys that count whole seconds (`lease_seconds`) or milliseconds
/// (`poll_interval_ms`): each `XSettings+ConfigReader.swift` passes the settings type's own value
/// as the default, so a default exists once, in the type; the value read is kept within
/// `atLeast...atMost` of the key's unit.
extension ConfigReader {
    func secondsDuration(
        forKey key: ConfigKey,
        default value: Duration,
        atLeast lower: Int,
        atMost upper: Int = .max,
        fileID: String = #fileID,
        line: UInt = #line
    ) -> Duration {
        let read = int(forKey: key, default: Int(value.components.seconds), fileID: fileID, line: line)
        return .seconds(min(max(lower, read), upper))
    }

    func millisecondsDuration(
        forKey key: ConfigKey,
        default value: Duration,
        atLeast lower: Int,
        atMost upper: Int = .max,
        fileID: String = #fileID,
        line: UInt = #line
    ) -> Duration {
        let read = int(forKey: key, default: Int(value / .milliseconds(1)), fileID: fileID, line: line)
        return .milliseconds(min(max(lower, read), upper))
    }
}
