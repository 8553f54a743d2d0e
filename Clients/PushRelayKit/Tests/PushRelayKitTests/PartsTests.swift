import Foundation
import Testing

@testable import PushRelayKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("PushRelayKit's parts: errors, reconnect delays, counts, the event-stream reader")
struct PartsTests {
    @Test("errors: a description for people, the message alone, and which are worth retrying by themselves")
    func errors() {
        let cases: [(PushRelayError, description: String, message: String, transient: Bool)] = [
            (.notAuthorized, "no user is authorized", "no user is authorized", false),
            (.unauthorized("bad signature"), "the relay refused the user token: bad signature", "bad signature", false),
            (.tokenProvider("offline"), "the token provider failed: offline", "offline", false),
            (.network("-1009 offline"), "network error: -1009 offline", "-1009 offline", true),
            (.server(status: 500, code: "internal", message: "boom"), "the relay answered 500 internal: boom", "boom", true),
            (.server(status: 503, code: "http_503", message: "unavailable"), "the relay answered 503 http_503: unavailable", "unavailable", true),
            (.server(status: 429, code: "too_many_streams", message: "wait"), "the relay answered 429 too_many_streams: wait", "wait", true),
            (
                .server(status: 409, code: "too_many_user_devices", message: "full"), "the relay answered 409 too_many_user_devices: full", "full",
                false
            ),
            (.server(status: 400, code: "invalid", message: "no"), "the relay answered 400 invalid: no", "no", false),
            (.invalidResponse("read: no total"), "unexpected answer from the relay: read: no total", "read: no total", false),
            (.pushKeyStore("locked"), "the push key store failed: locked", "locked", false),
        ]
        for (error, description, message, transient) in cases {
            #expect(error.description == description)
            #expect(error.message == message)
            #expect(error.isTransient == transient, "\(error)")
        }
    }

    @Test("reconnect delays double from 1 s up to 30 s, each within ±20 %, and start over after a reset")
    func backoff() {
        var backoff = Backoff()
        for attempt in 0..<14 {
            let base = min(30, pow(2, Double(attempt)))
            let delay = backoff.next()
            #expect(delay >= base * 0.8 && delay <= base * 1.2, "attempt \(attempt): \(delay)")
        }
        backoff.reset()
        let first = backoff.next()
        #expect(first >= 0.8 && first <= 1.2)
    }

    @Test("a count's description lists tickets in order; one ticket listed twice adds up; a body without its fields is refused")
    func counts() throws {
        #expect(UnreadCount.zero.description == "0")
        #expect(UnreadCount(total: 3, tickets: ["7": 1, "10": 2]).description == "3 (ticket 10: 2, ticket 7: 1)")
        let doubled = try JSONDecoder().decode(
            UnreadCount.self,
            from: Data(#"{"total":3,"tickets":[{"ticket_id":"5","unread":1},{"ticket_id":"5","unread":2}]}"#.utf8)
        )
        #expect(doubled == UnreadCount(total: 3, tickets: ["5": 3]))
        for body in [#"{"tickets":[]}"#, #"{"total":1}"#, #"{"total":"1","tickets":[]}"#, #"{"total":1,"tickets":[{"ticket_id":5,"unread":1}]}"#] {
            #expect(throws: DecodingError.self, "\(body)") { try JSONDecoder().decode(UnreadCount.self, from: Data(body.utf8)) }
        }
        #expect(UnreadCount(total: 0, tickets: [:]).badge(.dot) == .hidden)
        #expect(UnreadCount(total: 100, tickets: [:]).badge(.capped(at: 100)) == .text("100"))
    }

    @Test("the event-stream reader: CR line ends, fields without a value, unknown fields, events without data")
    func eventStreamEdges() {
        var parser = EventStreamParser()
        #expect(parser.feed(Data("event: unread\rdata: 1\r\r".utf8)) == [.init(name: "unread", data: "1")])
        // An event name alone dispatches nothing; a `data` line without a colon is an empty line of data.
        #expect(parser.feed(Data("event: unread\n\ndata\n\n".utf8)) == [.init(name: "message", data: "")])
        // `id:` and `retry:` are read and ignored; only one space after the colon is dropped.
        #expect(parser.feed(Data("id: 7\nretry: 1000\ndata:  two spaces\n\n".utf8)) == [.init(name: "message", data: " two spaces")])
        // A byte at a time: nothing until the blank line, then exactly one event.
        var events: [EventStreamParser.Event] = []
        for byte in Data("event: unread\ndata: {\"total\":2}\n\n".utf8) { events += parser.feed(Data([byte])) }
        #expect(events == [.init(name: "unread", data: #"{"total":2}"#)])
        #expect(parser.feed(Data("data: unfinished\n".utf8)).isEmpty)
    }

    @Test("the poll hint: max-age among other directives, in any case and spacing; none without it")
    func pollHints() throws {
        let url = URL(string: "http://relay/")!
        func hint(_ header: String?) throws -> TimeInterval? {
            let response = try #require(
                HTTPURLResponse(url: url, statusCode: 200, httpVersion: nil, headerFields: header.map { ["Cache-Control": $0] } ?? [:])
            )
            return UnreadCounter.maxAge(response)
        }
        #expect(try hint("MAX-AGE=30") == 30)
        #expect(try hint("no-transform ,  max-age=2.5 , private") == 2.5)
        #expect(try hint("max-age=soon") == nil)
        #expect(try hint("s-maxage=10") == nil)
        #expect(try hint(nil) == nil)
    }

    @Test("a refused token is forgotten only if it is still the one in use")
    func refusedToken() async throws {
        let mint = TokenMint("alice")
        let session = UserSession(userID: "alice", provider: mint.provider)
        #expect(try await session.token() == "alice-1")
        session.refused("alice-0")  // an older token: the current one stays
        #expect(try await session.token() == "alice-1")
        session.refused("alice-1")
        #expect(try await session.token() == "alice-2")
        #expect(mint.count == 2)
    }
}
