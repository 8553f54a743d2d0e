import HTTPTypes
import StrictJSON

/// The Zendesk Support SDK push webhook's format:
/// `{"devices":[{"identifier","type"}],"notification":{"title","body","ticket_id"}}`, read into the
/// outbox's ``PushNotification``.
extension PushNotification {
    /// Validates the parsed body; every rejection names the field.
    init(zendeskWebhook json: JSONBody, maxDevices: Int) throws {
        let notification = try json.object("notification")
        let title = try InputRules.text(try notification.string("title"), field: "notification.title")
        let body = try InputRules.text(try notification.string("body"), field: "notification.body")
        let ticketID = try InputRules.identifier(
            try notification.string("ticket_id"),
            field: "notification.ticket_id",
            maxBytes: InputRules.maxTicketBytes
        )
        let list = try json.array("devices")
        guard !list.isEmpty else { throw JSONBody.invalidField("devices", "must list at least one device") }
        guard list.count <= maxDevices else {
            throw APIError(
                .badRequest,
                code: "too_many_devices",
                message: "devices lists \(list.count) devices; at most \(maxDevices) are accepted per webhook"
            )
        }
        var seen = Set<String>()
        var devices: [Target] = []
        for (index, element) in list.enumerated() {
            let path = "devices[\(index)]"
            guard case .object(let object) = element else { throw JSONBody.invalidField(path, "must be an object") }
            let device = JSONBody(object: object, path: path)
            let identifier = try device.string("identifier")
            let type = try device.string("type")
            guard let platform = Platform(rawValue: type) else {
                throw JSONBody.invalidField("\(path).type", "must be \"ios\" or \"android\"")
            }
            guard let token = DeviceToken.normaliseFromWebhook(identifier, platform: platform) else {
                throw JSONBody.invalidField(
                    "\(path).identifier",
                    "must be 1-\(InputRules.maxTokenBytes) printable characters without spaces"
                )
            }
            if seen.insert(token).inserted { devices.append(Target(token: token, platform: platform)) }
        }
        self.init(title: title, body: body, ticketID: ticketID, devices: devices)
    }
}
