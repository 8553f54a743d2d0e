import Crypto

/// One collapse id per ticket, shared by APNs and FCM.
enum TicketCollapseID {
    /// The collapse id of a ticket's replies (`apns-collapse-id`, FCM's `collapse_key`): a duplicate
    /// delivery of the same ticket's reply collapses on the device. Safe as a header value for any
    /// ticket id, by construction: a ticket id of letters, digits, `-`, `_` and `.` that fits in APNs' 64 bytes is used as it is
    /// (`zendesk-ticket-4711`); any other becomes `zendesk-ticket~` and 128 bits of its SHA-256 in
    /// hex. `~` never appears in the first form, so the two cannot meet, and distinct ticket ids give
    /// distinct collapse ids.
    static func make(ticketID: String) -> String {
        let prefix = "zendesk-ticket-"
        if prefix.utf8.count + ticketID.utf8.count <= 64, !ticketID.isEmpty, ticketID.utf8.allSatisfy(isPlainIDByte) {
            return prefix + ticketID
        }
        var text = Array("zendesk-ticket~".utf8)
        Hex.append(SHA256.hash(data: Array(ticketID.utf8)).prefix(16), to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    private static func isPlainIDByte(_ byte: UInt8) -> Bool {
        InputRules.isAlphanumericASCII(byte) || byte == 0x2D || byte == 0x5F || byte == 0x2E
    }
}
