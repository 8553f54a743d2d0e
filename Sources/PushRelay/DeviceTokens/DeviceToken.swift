import HTTPTypes

/// The platforms PushRelay delivers to.
public enum Platform: String, Sendable, Codable, CaseIterable {
    case ios
    case android
}

/// Device token rules.
enum DeviceToken {
    /// Normalises and checks a token for the registry API: iOS tokens are hex of even length,
    /// 32–200 characters, stored lower-case; Android tokens are printable ASCII without spaces, at
    /// most ``InputRules/maxTokenBytes`` bytes. Returns `nil` with the reason when the token is unacceptable.
    static func normalise(_ token: String, platform: Platform) -> Result<String, APIError> {
        switch platform {
        case .ios:
            let count = token.utf8.count
            guard count >= 32, count <= 200, count % 2 == 0, token.utf8.allSatisfy(isHex) else {
                return .failure(
                    APIError(.badRequest, code: "invalid_field", message: "token must be an APNs token: hex, even length, 32-200 characters")
                )
            }
            return .success(token.lowercased())
        case .android:
            guard isPrintable(token) else {
                return .failure(
                    APIError(
                        .badRequest,
                        code: "invalid_field",
                        message: "token must be 1-\(InputRules.maxTokenBytes) bytes of printable characters without spaces"
                    )
                )
            }
            return .success(token)
        }
    }

    /// The looser rule for identifiers arriving in webhooks: the helpdesk's word is taken as long as
    /// the identifier is printable and bounded. Hex iOS tokens are still lower-cased so they match
    /// the registry.
    static func normaliseFromWebhook(_ token: String, platform: Platform) -> String? {
        guard isPrintable(token) else { return nil }
        if platform == .ios, token.utf8.allSatisfy(isHex) { return token.lowercased() }
        return token
    }

    /// A token from a lookup's path (`…/devices/{token}`): printable, else 400; hex tokens are
    /// compared lower-case, as they are stored.
    static func forLookup(_ token: String) throws -> String {
        guard isPrintable(token) else { throw JSONBody.invalidField("token", "must be printable characters without spaces") }
        return token.utf8.allSatisfy(isHex) ? token.lowercased() : token
    }

    static func isPrintable(_ token: String) -> Bool {
        !token.isEmpty && token.utf8.count <= InputRules.maxTokenBytes
            && token.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value != 0x7f && $0.isASCII }
    }

    static func isHex(_ byte: UInt8) -> Bool {
        (byte >= 48 && byte <= 57) || (byte >= 97 && byte <= 102) || (byte >= 65 && byte <= 70)
    }
}
