import Foundation
import Testing

@testable import PushRelay

@Suite("Provider reasons")
struct ProviderReasonTests {
    @Test("every known APNs reason and FCM code reads back as spelled; any other is kept as unknown")
    func names() {
        for reason in APNsReason.allCases {
            #expect(ProviderReason<APNsReason>(reason.rawValue) == .known(reason))
            #expect(ProviderReason<APNsReason>(reason.rawValue).name == reason.rawValue)
        }
        for code in FCMErrorCode.allCases {
            #expect(ProviderReason<FCMErrorCode>(code.rawValue) == .known(code))
        }
        #expect(ProviderReason<APNsReason>("SomethingNew") == .unknown("SomethingNew"))
        #expect(ProviderReason<APNsReason>("SomethingNew").name == "SomethingNew")
        #expect(ProviderReason<APNsReason>("badDeviceToken") == .unknown("badDeviceToken"), "reasons are case-sensitive")
    }

    @Test("a reason APNs adds later is classified by its status: 403 waits as credentials, 5xx retries, 400 fails")
    func unknownAPNsReasons() {
        #expect(
            PushOutcome.apns(status: 403, reason: "NewKeyProblem", retryAfter: nil, apnsID: nil)
                == .credential(reason: "NewKeyProblem", refreshToken: false)
        )
        #expect(PushOutcome.apns(status: 503, reason: "NewOutage", retryAfter: "7", apnsID: nil) == .retry(reason: "NewOutage", retryAfter: 7))
        #expect(PushOutcome.apns(status: 400, reason: "NewHeaderRule", retryAfter: nil, apnsID: nil) == .permanent(reason: "NewHeaderRule"))
        #expect(PushOutcome.apns(status: 410, reason: "ExpiredToken", retryAfter: nil, apnsID: nil) == .deadToken(reason: "ExpiredToken"))
        #expect(PushOutcome.apns(status: 400, reason: nil, retryAfter: nil, apnsID: nil) == .permanent(reason: "HTTP 400"))
    }
}
