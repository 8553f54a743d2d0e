import Foundation

/// A `PUT /v1/apps/{app}/devices/{token}` request's fields, each checked (a 400 that names the
/// field) before the relay authorises, stores or answers anything.
struct DeviceRegistrationRequest: Sendable {
    var platform: Platform
    /// The path's token, checked for the platform.
    var token: String
    /// As the body gives it; a user token's subject fills it in when absent.
    var userID: String?
    var environment: String?
    var locale: String?
    var pushKey: (id: String, bytes: Data)?

    init(body: JSONBody, pathToken: String) throws {
        let platformName = try body.string("platform")
        guard let platform = Platform(rawValue: platformName) else {
            throw JSONBody.invalidField("platform", "must be \"ios\" or \"android\"")
        }
        self.platform = platform
        token = try InputRules.deviceToken(pathToken, platform: platform).get()
        userID = try body.optionalString("user_id").map {
            try InputRules.identifier($0, field: "user_id", maxBytes: InputRules.maxUserBytes)
        }
        environment = try body.optionalString("environment")
        if let environment, environment != "production" && environment != "sandbox" {
            throw JSONBody.invalidField("environment", "must be \"production\" or \"sandbox\"")
        }
        locale = try body.optionalString("locale")
        if let locale, locale.isEmpty || locale.utf8.count > 35 || !locale.utf8.allSatisfy(Self.isLanguageTagByte) {
            throw JSONBody.invalidField("locale", "must be a language tag of 1-35 letters, digits, '-' or '_'")
        }
        pushKey = try Self.pushKey(body)
    }

    /// `push_key` (base64 of 32 bytes) and `push_key_id` (1-64 of `A-Z a-z 0-9 - _ .`), both or
    /// neither. The key's bytes never reach a message or a log line.
    static func pushKey(_ body: JSONBody) throws -> (id: String, bytes: Data)? {
        let key = try body.optionalString("push_key")
        let id = try body.optionalString("push_key_id")
        guard let key else {
            if id != nil { throw JSONBody.invalidField("push_key_id", "is given without push_key") }
            return nil
        }
        guard let bytes = Data(base64Encoded: key), bytes.count == 32 else {
            throw JSONBody.invalidField("push_key", "must be 32 random bytes in standard base64 (44 characters)")
        }
        guard let id else { throw JSONBody.invalidField("push_key_id", "is required with push_key") }
        guard !id.isEmpty, id.utf8.count <= 64,
            id.utf8.allSatisfy({ InputRules.isAlphanumericASCII($0) || $0 == 0x2D || $0 == 0x5F || $0 == 0x2E })
        else {
            throw JSONBody.invalidField("push_key_id", "must be 1-64 characters of A-Z a-z 0-9 - _ .")
        }
        return (id, bytes)
    }

    /// BCP 47 tags (`pt-BR`) and the POSIX form (`pt_BR`) apps often send.
    static func isLanguageTagByte(_ byte: UInt8) -> Bool {
        InputRules.isAlphanumericASCII(byte) || byte == 0x2D || byte == 0x5F
    }
}
