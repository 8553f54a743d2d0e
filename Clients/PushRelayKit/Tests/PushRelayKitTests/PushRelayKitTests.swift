import Foundation
import Testing

@testable import PushRelayKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("PushRelayKit without a relay: pushes, badges, tokens, the event-stream reader")
struct PushRelayKitTests {
    @Test("an APNs reply as JSONSerialization reads it: ticket, badge, notification id")
    func apnsReply() throws {
        let payload =
            #"{"aps":{"alert":{"body":"Hello","title":"Agent replied"},"badge":3,"sound":"default"},"#
            + #""push_relay_notification_id":42,"zendesk_sdk_request_id":"5"}"#
        let userInfo = try #require(try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [AnyHashable: Any])
        let push = try #require(PushRelayNotification(userInfo: userInfo))
        #expect(push == PushRelayNotification(ticketID: "5", badge: 3, notificationID: 42, isBadgeSync: false))
    }

    @Test("a silent APNs badge sync and an FCM read sync are badge syncs without a ticket")
    func badgeSyncs() throws {
        let apns = try #require(
            try JSONSerialization.jsonObject(with: Data(#"{"aps":{"content-available":1,"badge":0}}"#.utf8)) as? [AnyHashable: Any]
        )
        #expect(PushRelayNotification(userInfo: apns) == PushRelayNotification(ticketID: nil, badge: 0, notificationID: nil, isBadgeSync: true))
        let fcm = PushRelayNotification(data: ["unread_count": "4", "zendesk_sdk_event": "read_sync"])
        #expect(fcm == PushRelayNotification(ticketID: nil, badge: 4, notificationID: nil, isBadgeSync: true))
    }

    @Test("an FCM reply's data map: all strings")
    func fcmReply() {
        let push = PushRelayNotification(data: [
            "zendesk_sdk_request_id": "77", "title": "t", "body": "b", "unread_count": "12", "push_relay_notification_id": "9001",
        ])
        #expect(push == PushRelayNotification(ticketID: "77", badge: 12, notificationID: 9001, isBadgeSync: false))
    }

    @Test("pushes that are not the relay's are nil: another service's alert, a silent push with an alert")
    func foreignPushes() {
        #expect(PushRelayNotification(userInfo: ["aps": ["alert": "Sale!", "badge": 1] as [String: Any]]) == nil)
        #expect(PushRelayNotification(userInfo: ["aps": ["content-available": 1, "alert": "x"] as [String: Any]]) == nil)
        #expect(PushRelayNotification(data: ["title": "x"]) == nil)
    }

    @Test("badges: hidden at 0, a number, 99+ past the cap, a dot")
    func badges() {
        #expect(UnreadCount.zero.badge() == .hidden)
        #expect(UnreadCount(total: 7, tickets: ["1": 7]).badge() == .text("7"))
        #expect(UnreadCount(total: 99, tickets: [:]).badge() == .text("99"))
        #expect(UnreadCount(total: 100, tickets: [:]).badge() == .text("99+"))
        #expect(UnreadCount(total: 1000, tickets: [:]).badge(.number) == .text("1000"))
        #expect(UnreadCount(total: 12, tickets: [:]).badge(.capped(at: 9)) == .text("9+"))
        #expect(UnreadCount(total: 3, tickets: [:]).badge(.dot) == .dot)
    }

    @Test("the relay's unread JSON decodes into per-ticket counts")
    func decode() throws {
        let count = try JSONDecoder().decode(
            UnreadCount.self,
            from: Data(#"{"tickets":[{"ticket_id":"5","unread":2},{"ticket_id":"7","unread":1}],"total":3}"#.utf8)
        )
        #expect(count == UnreadCount(total: 3, tickets: ["5": 2, "7": 1]))
        #expect(count.unread(ticket: "7") == 1 && count.unread(ticket: "8") == 0)
    }

    @Test("an APNs token's identifier is its bytes in lower-case hex")
    func identifier() {
        #expect(PushRelayClient.identifier(forDeviceToken: Data([0x00, 0x0F, 0xA0, 0xFF, 0x5C])) == "000fa0ff5c")
        #expect(PushRelayClient.identifier(forDeviceToken: Data(repeating: 0xAB, count: 32)).count == 64)
    }

    @Test("path segments are percent-encoded: a user id with / ? # % and spaces stays one segment")
    func pathSegments() {
        let transport = Transport(baseURL: URL(string: "https://push.example.com/relay/")!, appID: "support", session: .shared, timeout: 5)
        let url = transport.url(["users", "a/b?c#d%e f", "unread"])
        #expect(url.absoluteString == "https://push.example.com/relay/v1/apps/support/users/a%2Fb%3Fc%23d%25e%20f/unread")
    }

    @Test("the event-stream reader: events split across chunks, comments, CRLF, multi-line data")
    func eventStream() {
        var parser = EventStreamParser()
        #expect(parser.feed(Data(": heartbeat\n\nevent: unr".utf8)).isEmpty)
        #expect(parser.feed(Data("ead\ndata: {\"total\":1}\n".utf8)).isEmpty)
        #expect(
            parser.feed(Data("\nevent: unread\r\ndata: a\r\ndata: b\r\n\r\n".utf8)) == [
                .init(name: "unread", data: #"{"total":1}"#), .init(name: "unread", data: "a\nb"),
            ]
        )
        #expect(parser.feed(Data("data:x\n\n".utf8)) == [.init(name: "message", data: "x")])
    }

    @Test("Cache-Control max-age is the poll hint")
    func pollHint() throws {
        let url = URL(string: "http://relay/")!
        let response = try #require(
            HTTPURLResponse(url: url, statusCode: 200, httpVersion: nil, headerFields: ["Cache-Control": "private, max-age=15"])
        )
        #expect(UnreadCounter.maxAge(response) == 15)
        let none = try #require(HTTPURLResponse(url: url, statusCode: 200, httpVersion: nil, headerFields: ["Cache-Control": "no-cache"]))
        #expect(UnreadCounter.maxAge(none) == nil)
    }

    @Test("concurrent requests for a user token share one provider call, also callers arriving as it completes")
    func oneProviderCall() async throws {
        for _ in 0..<20 {
            let calls = Locked(0)
            let session = UserSession(userID: "alice") { _ in
                calls.withLock { $0 += 1 }
                try await Task.sleep(for: .milliseconds(5))
                return "token"
            }
            let tokens = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<100 {
                    group.addTask {
                        try await Task.sleep(for: .microseconds(index * 100))
                        return try await session.token()
                    }
                }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
            #expect(tokens.count == 100 && Set(tokens) == ["token"])
            #expect(calls.withLock { $0 } == 1)
        }
    }
}
