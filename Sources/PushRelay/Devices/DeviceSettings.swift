/// The device registry (`devices.*`); the values below are the defaults, and
/// `DeviceSettings+ConfigReader.swift` reads the keys.
///
/// Keys, read from a reader scoped to `devices`:
/// - `max_per_user` (int, default 20, 1 to 10,000): active devices one user may have in an app. A
///   registration that would link one more to the user is 409 `too_many_user_devices`; the user's app
///   unregisters one first (a device already the user's may always be registered again).
public struct DeviceSettings: Sendable {
    /// Active devices one user may have in an app, 1 to 10,000.
    public var maxPerUser = 20
    /// Seals registered push keys at rest (the apps-store key, when configured).
    var pushKeys = DevicePushKeys()

    public init() {}
}
