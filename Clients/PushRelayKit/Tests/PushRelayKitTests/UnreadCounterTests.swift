import Foundation
import Testing

@testable import PushRelayKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Unread counter, against a stub")
struct UnreadCounterTests {
    /// The relay's unread JSON for `tickets`.
    static func unread(_ tickets: [String: Int]) -> String {
        let list = tickets.sorted { $0.key < $1.key }.map { #"{"ticket_id":"\#($0.key)","unread":\#($0.value)}"# }
        return #"{"total":\#(tickets.values.reduce(0, +)),"tickets":[\#(list.joined(separator: ","))]}"#
    }

    /// The next count the counter reports, skipping errors.
    static func nextCount(_ events: inout AsyncStream<UnreadEvent>.Iterator) async -> UnreadCount? {
        while let event = await events.next() {
            if case .changed(let count) = event { return count }
        }
        return nil
    }

    @Test("polls are conditional: the ETag of the last body is sent, and a 304 keeps its count")
    func conditionalPolls() async throws {
        let host = RelayStub.host("etag") { request in
            request.ifNoneMatch == #""v1""#
                ? .answer(304, headers: ["ETag": #""v1""#], body: "")
                : .json(200, Self.unread(["5": 2]), headers: ["ETag": #""v1""#, "Cache-Control": "private, max-age=5"])
        }
        let relay = RelayStub.client(host)
        var events = await relay.unread.updates().makeAsyncIterator()
        try await relay.authorize(userID: "alice") { _ in "alice-1" }
        let loaded = await Self.nextCount(&events)
        #expect(loaded == UnreadCount(total: 2, tickets: ["5": 2]))
        #expect(try await relay.unread.getUnreadMessagesCount() == loaded)
        #expect(await relay.unread.count == loaded)
        #expect(RelayStub.requests(host, "GET").map(\.ifNoneMatch) == [nil, #""v1""#])
        #expect(RelayStub.requests(host, "GET").allSatisfy { $0.path == "users/alice/unread" })
        try await relay.deauthorize()
    }

    @Test("answers the API does not promise are invalidResponse: a 304 not asked for, a body that is not counts")
    func invalidAnswers() async throws {
        let notModified = RelayStub.host("304") { _ in .answer(304, headers: [:], body: "") }
        let relay = RelayStub.client(notModified)
        try await relay.authorize(userID: "alice") { _ in "alice-1" }
        await #expect(throws: PushRelayError.invalidResponse("304 to a request without If-None-Match")) {
            try await relay.unread.getUnreadMessagesCount()
        }
        try await relay.deauthorize()

        let garbled = RelayStub.host("garbled") { _ in .json(200, #"{"count":3}"#) }
        let other = RelayStub.client(garbled)
        try await other.authorize(userID: "alice") { _ in "alice-1" }
        let error = await #expect(throws: PushRelayError.self) { try await other.unread.getUnreadMessagesCount() }
        guard case .invalidResponse(let message) = error else {
            Issue.record("expected invalidResponse, got \(String(describing: error))")
            return
        }
        #expect(message.hasPrefix("unread counts: "))
        #expect(await other.unread.count == nil)
        try await other.deauthorize()
    }

    @Test("a failing background poll is reported as an event, without a count")
    func backgroundFailure() async throws {
        let host = RelayStub.host("poll-fails") { _ in .error(503, code: "unavailable", message: "restarting") }
        let relay = RelayStub.client(host)
        var events = await relay.unread.updates().makeAsyncIterator()
        try await relay.authorize(userID: "alice") { _ in "alice-1" }
        #expect(await events.next() == .networkError(.server(status: 503, code: "unavailable", message: "restarting")))
        #expect(await relay.unread.count == nil)
        try await relay.deauthorize()
    }

    @Test("markRead: posts the ticket and this device; the count is worked out locally when its tickets add up")
    func markRead() async throws {
        let totals = Locked([1, 4])
        let host = RelayStub.host("read") { request in
            if request.method == "POST" {
                let total = totals.withLock { $0.removeFirst() }
                return .json(200, #"{"total":\#(total)}"#)
            }
            let unread = totals.withLock { $0.count } == 0 ? ["9": 4] : ["5": 2, "7": 1]
            return .json(200, Self.unread(unread))
        }
        let relay = RelayStub.client(host)
        var events = await relay.unread.updates().makeAsyncIterator()
        try await relay.setDeviceToken(identifier: "token-1")
        try await relay.authorize(userID: "alice") { _ in "alice-1" }
        #expect(await Self.nextCount(&events) == UnreadCount(total: 3, tickets: ["5": 2, "7": 1]))
        let gets = RelayStub.requests(host, "GET").count

        // 3 - 2 = 1, and ticket 7's one reply is that 1: no request besides the read.
        #expect(try await relay.unread.markRead(ticket: "5") == UnreadCount(total: 1, tickets: ["7": 1]))
        #expect(RelayStub.requests(host, "GET").count == gets)
        #expect(await Self.nextCount(&events) == UnreadCount(total: 1, tickets: ["7": 1]))
        let read = try #require(RelayStub.requests(host, "POST").first)
        #expect(read.path == "users/alice/tickets/5/read" && read.body == ["device": "token-1"])

        // A reply came meanwhile: the relay's total (4) is not what the tickets add up to, so the
        // counts are asked for.
        #expect(try await relay.unread.markRead(ticket: "7") == UnreadCount(total: 4, tickets: ["9": 4]))
        #expect(RelayStub.requests(host, "GET").count == gets + 1)
        try await relay.deauthorize()
    }

    @Test("markAllRead: up to a notification id when given; a total of 0 is zero without another request")
    func markAllRead() async throws {
        let host = RelayStub.host("read-all") { request in
            request.method == "POST" ? .json(200, #"{"total":0}"#) : .json(200, Self.unread(["5": 1]))
        }
        let relay = RelayStub.client(host)
        var events = await relay.unread.updates().makeAsyncIterator()
        try await relay.authorize(userID: "alice") { _ in "alice-1" }
        #expect(await Self.nextCount(&events) == UnreadCount(total: 1, tickets: ["5": 1]))
        let gets = RelayStub.requests(host, "GET").count
        #expect(try await relay.unread.markAllRead(upTo: 42) == .zero)
        #expect(try await relay.unread.markAllRead() == .zero)
        #expect(RelayStub.requests(host, "POST").map(\.path) == ["users/alice/read-all", "users/alice/read-all"])
        #expect(RelayStub.requests(host, "POST").map(\.body) == [["up_to_notification_id": "42"], [:]])
        #expect(RelayStub.requests(host, "GET").count == gets)
        try await relay.deauthorize()
    }

    @Test("a read the relay refuses throws its error and leaves the count as it was")
    func readRefused() async throws {
        let host = RelayStub.host("read-refused") { request in
            request.method == "POST" ? .error(404, code: "not_found", message: "no such ticket") : .json(200, Self.unread(["5": 2]))
        }
        let relay = RelayStub.client(host)
        var events = await relay.unread.updates().makeAsyncIterator()
        try await relay.authorize(userID: "alice") { _ in "alice-1" }
        let before = await Self.nextCount(&events)
        await #expect(throws: PushRelayError.server(status: 404, code: "not_found", message: "no such ticket")) {
            try await relay.unread.markRead(ticket: "5")
        }
        #expect(await relay.unread.count == before)
        try await relay.deauthorize()
    }

    @Test("another user: the count goes to zero once, then the new user's; the same count is not reported twice")
    func userSwitch() async throws {
        let host = RelayStub.host("switch-count") { request in
            .json(200, Self.unread(request.path.hasPrefix("users/alice/") ? ["5": 2] : ["8": 3]))
        }
        let relay = RelayStub.client(host)
        var events = await relay.unread.updates().makeAsyncIterator()
        try await relay.authorize(userID: "alice") { _ in "alice-1" }
        #expect(await Self.nextCount(&events) == UnreadCount(total: 2, tickets: ["5": 2]))
        _ = try await relay.unread.getUnreadMessagesCount()  // the same count: no event
        try await relay.authorize(userID: "bob") { _ in "bob-1" }
        #expect(await Self.nextCount(&events) == .zero)
        #expect(await Self.nextCount(&events) == UnreadCount(total: 3, tickets: ["8": 3]))
        #expect(await relay.unread.count == UnreadCount(total: 3, tickets: ["8": 3]))
        try await relay.deauthorize()
    }

    @Test("a push from the relay refreshes the count")
    func pushArrival() async throws {
        let replies = Locked(0)
        let host = RelayStub.host("push") { _ in
            let count = replies.withLock { $0 }
            return .json(200, Self.unread(count == 0 ? [:] : ["5": count]))
        }
        let relay = RelayStub.client(host)
        var events = await relay.unread.updates().makeAsyncIterator()
        try await relay.authorize(userID: "alice") { _ in "alice-1" }
        #expect(await Self.nextCount(&events) == .zero)
        replies.withLock { $0 = 2 }
        await relay.unread.handle(PushRelayNotification(ticketID: "5", badge: 2, notificationID: 1, isBadgeSync: false))
        #expect(await Self.nextCount(&events) == UnreadCount(total: 2, tickets: ["5": 2]))
        try await relay.deauthorize()
    }
}
