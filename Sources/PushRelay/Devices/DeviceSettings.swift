import Configuration

/// The device registry (`devices.*`).
///
/// Keys, read from a reader scoped to `devices`:
/// - `max_per_user` (int, default 20, 1 to 10,000): active devices one user may have in an app. A
///   registration that would link one more to the user is 409 `too_many_user_devices`; the user's app
///   unregisters one first (a device already the user's may always be registered again).
public struct DeviceSettings: Sendable {
    public var maxPerUser: Int
    /// Seals registered push keys at rest (the apps-store key, when configured).
    var pushKeys = DevicePushKeys()

    public init(config: ConfigReader) {
        maxPerUser = min(max(1, config.int(forKey: "max_per_user", default: 20)), 10_000)
    }

    init(config: ConfigReader, pushKeys: DevicePushKeys) {
        self.init(config: config)
        self.pushKeys = pushKeys
    }

    public init(maxPerUser: Int = 20) { self.maxPerUser = maxPerUser }
}
