/// One notification to store: an agent's reply and the devices it goes to (a webhook's content,
/// already validated by whoever read it).
struct PushNotification: Sendable, Hashable {
    struct Target: Sendable, Hashable {
        var token: String
        var platform: Platform
    }

    var title: String
    var body: String
    var ticketID: String
    /// Distinct devices, in the order first seen.
    var devices: [Target]

    /// A notification as given, unchecked (tests use it for what storage does with values intake's
    /// checks would refuse).
    init(title: String, body: String, ticketID: String, devices: [Target]) {
        self.title = title
        self.body = body
        self.ticketID = ticketID
        self.devices = devices
    }
}

/// One notification ready to be stored, for one app.
struct IntakeItem: Sendable {
    var appID: String
    var notification: PushNotification
    var requestID: String?
    /// The app's content mode when the webhook came: what of the text is stored.
    var content: PushSettings.Content = .full
}

/// What the caller learns once its notification is committed.
struct IntakeReceipt: Sendable, Hashable {
    var notificationID: Int64
    var deliveries: Int
    var skipped: Int
}
