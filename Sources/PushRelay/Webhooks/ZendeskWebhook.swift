import HTTPTypes
/// A validated Zendesk Support SDK push webhook:
/// `{"devices":[{"identifier","type"}],"notification":{"title","body","ticket_id"}}`.
struct ZendeskWebhook: Sendable, Hashable {
    struct Target: Sendable, Hashable {
        var token: String
        var platform: Platform
    }

    var title: String
    var body: String
    var ticketID: String
    /// Distinct devices, in the order first seen.
    var devices: [Target]

    /// A webhook as given, unchecked: for tests of what storage does with values the checks below
    /// would refuse.
    init(title: String, body: String, ticketID: String, devices: [Target]) {
        self.title = title
        self.body = body
        self.ticketID = ticketID
        self.devices = devices
    }

    /// Validates the parsed body; every rejection names the field.
    init(json: JSONBody, maxDevices: Int) throws {
        let notification = try json.object("notification")
        title = try InputRules.text(try notification.string("title"), field: "notification.title")
        body = try InputRules.text(try notification.string("body"), field: "notification.body")
        ticketID = try InputRules.identifier(
            try notification.string("ticket_id"), field: "notification.ticket_id", maxBytes: InputRules.maxTicketBytes
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
                throw JSONBody.invalidField("\(path).identifier", "must be 1-\(InputRules.maxTokenBytes) printable characters without spaces")
            }
            if seen.insert(token).inserted { devices.append(Target(token: token, platform: platform)) }
        }
        self.devices = devices
    }
}
