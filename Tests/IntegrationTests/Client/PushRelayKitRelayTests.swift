import Foundation
import Postgres
import PushRelay
import PushRelayKit
import PushSandbox
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A `push-relay serve` process for PushRelayKit's tests: app `support` with user tokens,
/// delivering to the harness's sandbox, heartbeats every second and a poll hint of one second.
struct KitRelay {
    let harness: DeliveryHarness
    let configFile: String
    let port: Int
    let log: String
    var process: RelayProcess

    static func start() async throws -> KitRelay {
        let harness = try await DeliveryHarness.make()
        let configFile = harness.directory + "/push-relay.yaml"
        try """
        database:
          url: "\(harness.test.conninfo)"
          max_connections: 6
        tls:
          ca_file: \(harness.sandbox.certificates.caFile)
        delivery:
          poll_interval_ms: 100
          retry_base_ms: 100
        unread:
          heartbeat_seconds: 1
          poll_after_seconds: 1
        apps:
        \(try harness.appYAML(harness.test.apps[0]))
        """.write(toFile: configFile, atomically: true, encoding: .utf8)
        let port = try EmbeddedPostgres.freePort()
        let log = harness.directory + "/relay.log"
        let process = try await RelayProcess.start(configFile: configFile, port: port, log: log)
        return KitRelay(harness: harness, configFile: configFile, port: port, log: log, process: process)
    }

    /// Starts the relay again on the same port, after ``RelayProcess/stop()``.
    mutating func restart() async throws {
        process = try await RelayProcess.start(configFile: configFile, port: port, log: log)
    }

    func shutdown() async {
        await process.stop()
        await harness.shutdown()
    }

    /// Starts a relay, runs `body` with it (which may restart it) and shuts it down before
    /// returning or throwing.
    static func with<T: Sendable>(_ body: (inout KitRelay) async throws -> T) async throws -> T {
        var relay = try await start()
        do {
            let result = try await body(&relay)
            await relay.shutdown()
            return result
        } catch {
            await relay.shutdown()
            throw error
        }
    }

    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

    var userTokenKeyFile: String { harness.test.apps[0].userTokens?.secretFile ?? "" }

    func client(requestTimeout: TimeInterval = 5) -> PushRelayClient {
        PushRelayClient(configuration: .init(baseURL: baseURL, appID: "support", requestTimeout: requestTimeout, streamIdleTimeout: 5))
    }

    /// A client with a new APNs token, signed in as `user`, and the log of its counter's events
    /// (kept from before the sign-in).
    func signedInDevice(
        user: String,
        issuer: TokenIssuer,
        requestTimeout: TimeInterval = 5
    ) async throws -> (client: PushRelayClient, token: String, log: EventLog) {
        let client = client(requestTimeout: requestTimeout)
        let log = await EventLog(client.unread)
        let token = PushRelayClient.identifier(forDeviceToken: randomAPNsToken())
        try await client.setDeviceToken(identifier: token)
        try await client.authorize(userID: user, tokenProvider: issuer.provider)
        return (client, token, log)
    }

    /// The helpdesk's webhook for `tokens` (iOS): the notification id.
    @discardableResult
    func reply(ticket: String, to tokens: [String]) async throws -> Int64 {
        let answer = try await process.request(
            "POST",
            "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)",
            body: webhook(devices: tokens.map { ($0, "ios") }, ticket: ticket)
        )
        #expect(answer.status == 202)
        let object = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
        return try #require((object?["notification_id"] as? NSNumber)?.int64Value)
    }

    /// `push_relay_unread_polls_total` for `support`, by answer.
    func polls() async throws -> [String: Int] {
        let text = String(decoding: try await process.request("GET", "/metrics").body, as: UTF8.self)
        var counts: [String: Int] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("push_relay_unread_polls_total{") && line.contains(#"app="support""#) {
            guard let answer = line.firstRange(of: #"answer=""#).map({ line[$0.upperBound...].prefix { $0 != "\"" } }),
                let value = line.split(separator: " ").last.flatMap({ Double($0) })
            else { continue }
            counts[String(answer)] = Int(value)
        }
        return counts
    }

    /// The pushes the sandbox received for `token`, as an app's `userInfo` would hold them.
    func pushes(token: String) -> [PushRelayNotification?] {
        harness.requests(token: token).filter { $0.service == "apns" }.map { request in
            let object = try? JSONSerialization.jsonObject(with: Data(request.body.utf8)) as? [AnyHashable: Any]
            return object.flatMap(PushRelayNotification.init(userInfo:))
        }
    }

    func deviceOwner(_ token: String) async throws -> String? {
        try await harness.test.client.query("SELECT user_id FROM devices WHERE token = $1", [token]).rows.first?.decode(String?.self, at: 0)
    }
}

/// Counts a provider's calls and signs user JWTs as the app's backend would.
final class TokenIssuer: Sendable {
    private let calls = Mutex<[String]>([])
    let lifetime: TimeInterval

    init(lifetime: TimeInterval = 600) { self.lifetime = lifetime }

    var provider: UserTokenProvider {
        { [self] user in
            calls.withLock { $0.append(user) }
            return try await TestApp.userToken(user, expiresIn: lifetime)
        }
    }

    var issued: [String] { calls.withLock { $0 } }
}

/// Everything a counter reported: through `updates()` and through its delegate. (The delegate's
/// methods are main-actor isolated, which Swift 6 checks when they are called; which thread runs
/// the main actor in a test process is the test runner's business, so no test looks at threads.)
final class EventLog: Sendable {
    final class Store: Sendable {
        let streamed = Mutex<[UnreadEvent]>([])
        let delegated = Mutex<[UnreadEvent]>([])
        let task = Mutex<Task<Void, Never>?>(nil)
    }

    private let store = Store()
    let delegate: Recorder

    @MainActor
    final class Recorder: UnreadCounterDelegate {
        let log: @Sendable (UnreadEvent) -> Void
        init(log: @escaping @Sendable (UnreadEvent) -> Void) { self.log = log }
        func didChangeUnreadMessages(_ count: UnreadCount) { log(.changed(count)) }
        func didReceiveNetwork(_ error: PushRelayError) { log(.networkError(error)) }
    }

    @MainActor
    init(_ counter: UnreadCounter) async {
        let store = self.store
        delegate = Recorder { event in store.delegated.withLock { $0.append(event) } }
        counter.delegate = delegate
        let stream = await counter.updates()
        let task = Task {
            for await event in stream { store.streamed.withLock { $0.append(event) } }
        }
        store.task.withLock { $0 = task }
    }

    deinit { store.task.withLock { $0?.cancel() } }

    /// Totals reported through the stream, in order.
    var totals: [Int] { counts.map(\.total) }
    var counts: [UnreadCount] {
        store.streamed.withLock { $0.compactMap { if case .changed(let count) = $0 { count } else { nil } } }
    }
    var errors: [PushRelayError] {
        store.streamed.withLock { $0.compactMap { if case .networkError(let error) = $0 { error } else { nil } } }
    }
    var events: [UnreadEvent] { store.streamed.withLock { $0 } }
    var delegateEvents: [UnreadEvent] { store.delegated.withLock { $0 } }

    /// The last total, once it is `total`.
    func reaches(_ total: Int) async -> Bool {
        await eventually { self.totals.last == total }
    }
}

func randomAPNsToken() -> Data { Data((0..<32).map { _ in UInt8.random(in: 0...255) }) }

@Suite("PushRelayKit against a running relay", .serialized, .timeLimit(.minutes(3)))
struct PushRelayKitRelayTests {
    @Test("register, reply, read: counts arrive by the live stream and by polling, unchanged polls are 304s, a read on one device reaches the other")
    func twoDevices() async throws {
        try await KitRelay.with { relay in
            let issuer = TokenIssuer()
            let phone = relay.client()
            let tablet = relay.client()
            let phoneLog = await EventLog(phone.unread)
            let tabletLog = await EventLog(tablet.unread)

            // The phone's token comes before sign-in: kept, and registered at sign-in.
            let phoneData = randomAPNsToken()
            let phoneToken = PushRelayClient.identifier(forDeviceToken: phoneData)
            try await phone.setDeviceToken(phoneData)
            #expect(await phone.isRegistered == false)
            #expect(try await relay.deviceOwner(phoneToken) == nil)
            try await phone.authorize(userID: "alice", tokenProvider: issuer.provider)
            #expect(await phone.isRegistered)
            #expect(try await relay.deviceOwner(phoneToken) == "alice")
            await phone.unread.enterForeground()

            // The tablet signs in first, then gets its token; it polls every second.
            try await tablet.authorize(userID: "alice", tokenProvider: issuer.provider)
            let tabletToken = PushRelayClient.identifier(forDeviceToken: randomAPNsToken())
            try await tablet.setDeviceToken(identifier: tabletToken)
            #expect(try await relay.deviceOwner(tabletToken) == "alice")
            await tablet.unread.setUnreadMessageCountDelay(1)
            #expect(await phoneLog.reaches(0))
            #expect(await tabletLog.reaches(0))

            let first = try await relay.reply(ticket: "5", to: [phoneToken, tabletToken])
            #expect(await phoneLog.reaches(1))
            #expect(await tabletLog.reaches(1))
            #expect(phoneLog.counts.last == UnreadCount(total: 1, tickets: ["5": 1]))

            // Unchanged: the tablet's polls are 304s the relay answers without reading the counts.
            let before = try await relay.polls()
            try await Task.sleep(for: .seconds(4))
            let after = try await relay.polls()
            let notModified =
                (after["cached", default: 0] + after["cached_routed", default: 0])
                - (before["cached", default: 0] + before["cached_routed", default: 0])
            let reads = after["read", default: 0] - before["read", default: 0]
            #expect(notModified >= 2, "\(before) → \(after)")
            #expect(reads == 0, "\(before) → \(after)")
            #expect(tabletLog.totals == [0, 1])

            // The push as the app receives it: the ticket to open, the badge, the notification id.
            #expect(await eventually { relay.pushes(token: phoneToken).count == 1 })
            #expect(
                relay.pushes(token: phoneToken).first == PushRelayNotification(ticketID: "5", badge: 1, notificationID: first, isBadgeSync: false)
            )

            let second = try await relay.reply(ticket: "7", to: [phoneToken, tabletToken])
            #expect(await phoneLog.reaches(2))
            #expect(await tabletLog.reaches(2))

            // Alice opens ticket 5 on the phone: the tablet follows, and only the tablet gets a badge sync.
            let afterRead = try await phone.unread.markRead(ticket: "5")
            #expect(afterRead == UnreadCount(total: 1, tickets: ["7": 1]))
            #expect(await tabletLog.reaches(1))
            #expect(tabletLog.counts.last == UnreadCount(total: 1, tickets: ["7": 1]))
            #expect(await eventually { relay.pushes(token: tabletToken).contains { $0?.isBadgeSync == true && $0?.badge == 1 } })
            #expect(relay.pushes(token: phoneToken).allSatisfy { $0?.isBadgeSync == false })

            // Read up to the second reply: a third, newer one stays unread.
            _ = try await relay.reply(ticket: "7", to: [phoneToken])
            #expect(await phoneLog.reaches(2))
            let upTo = try await phone.unread.markAllRead(upTo: second)
            #expect(upTo.total == 1)
            #expect(try await phone.unread.getUnreadMessagesCount() == UnreadCount(total: 1, tickets: ["7": 1]))
            _ = try await phone.unread.markAllRead()
            #expect(await phoneLog.reaches(0))
            #expect(await tabletLog.reaches(0))

            // The delegate saw what the stream saw, in the same order; no errors; one token per user and device.
            #expect(await eventually { phoneLog.delegateEvents.count == phoneLog.events.count })
            #expect(phoneLog.delegateEvents == phoneLog.events)
            #expect(tabletLog.delegateEvents == tabletLog.events)
            #expect(phoneLog.errors.isEmpty && tabletLog.errors.isEmpty, "\(phoneLog.errors) \(tabletLog.errors)")
            #expect(issuer.issued == ["alice", "alice"])

            try await phone.deauthorize()
            try await tablet.deauthorize()
            #expect(try await relay.deviceOwner(phoneToken) == nil)
            #expect(try await relay.deviceOwner(tabletToken) == nil)
        }
    }

    @Test("a user switch reports 0 once, then the new user's count; re-authorizing the same user is silent; after deauthorize nothing is reported")
    func userSwitch() async throws {
        try await KitRelay.with { relay in
            let issuer = TokenIssuer()
            // Bob has two unread replies on a device of his own.
            let (bobsPhone, bobsToken, _) = try await relay.signedInDevice(user: "bob", issuer: issuer)
            try await relay.reply(ticket: "3", to: [bobsToken])
            try await relay.reply(ticket: "4", to: [bobsToken])

            let (shared, token, log) = try await relay.signedInDevice(user: "alice", issuer: issuer)
            await shared.unread.enterForeground()
            #expect(await log.reaches(0))
            try await relay.reply(ticket: "5", to: [token])
            #expect(await log.reaches(1))

            // Foreground, background, foreground…: each change cancels requests in flight, which is no
            // error. (Streams closed this fast stay open on the relay until its next heartbeat, so
            // some reconnects may be refused with 429 too_many_streams; the counter polls meanwhile.)
            await shared.unread.setUnreadMessageCountDelay(1)
            for _ in 0..<10 {
                await shared.unread.enterBackground()
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...30)))
                await shared.unread.enterForeground()
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...30)))
            }
            await shared.unread.setUnreadMessageCountDelay(0)
            #expect(!log.errors.contains { if case .network = $0 { true } else { false } }, "\(log.errors)")
            #expect(log.errors.allSatisfy { $0 == .server(status: 429, code: "too_many_streams", message: $0.message) }, "\(log.errors)")
            try await Task.sleep(for: .seconds(1.5))

            // The same user again: nothing reported, no new token asked for.
            try await shared.authorize(userID: "alice", tokenProvider: issuer.provider)
            try await Task.sleep(for: .seconds(1.5))
            #expect(log.totals == [0, 1])
            #expect(issuer.issued == ["bob", "alice"])

            // Alice signs out, bob signs in on the same device: 0 once, then bob's 2.
            try await shared.deauthorize()
            try await shared.authorize(userID: "bob", tokenProvider: issuer.provider)
            #expect(await log.reaches(2))
            try await Task.sleep(for: .seconds(1))
            #expect(log.totals == [0, 1, 0, 2])
            #expect(log.counts.last == UnreadCount(total: 2, tickets: ["3": 1, "4": 1]))
            #expect(try await relay.deviceOwner(token) == "bob")

            // A switch without signing out first: the previous registration ends, 0 once, then carol's 0 is no change.
            try await shared.authorize(userID: "carol", tokenProvider: issuer.provider)
            #expect(try await relay.deviceOwner(token) == "carol")
            try await Task.sleep(for: .seconds(1))
            #expect(log.totals == [0, 1, 0, 2, 0])

            // Signed out: bob's count moves on his phone, nothing reaches this counter.
            try await shared.deauthorize()
            let reported = log.events.count
            let delegated = log.delegateEvents.count
            try await relay.reply(ticket: "6", to: [bobsToken])
            #expect(try await bobsPhone.unread.getUnreadMessagesCount().total == 3)
            try await Task.sleep(for: .seconds(2))
            #expect(log.events.count == reported)
            #expect(log.delegateEvents.count == delegated)
            await #expect(throws: PushRelayError.notAuthorized) { try await shared.unread.getUnreadMessagesCount() }
            try await bobsPhone.deauthorize()
        }
    }

    @Test("the relay going away: network errors are reported while it is down, and the count comes back with it")
    func relayOutage() async throws {
        try await KitRelay.with { relay in
            let issuer = TokenIssuer()
            let (phone, token, log) = try await relay.signedInDevice(user: "dana", issuer: issuer, requestTimeout: 2)
            await phone.unread.setUnreadMessageCountDelay(1)
            await phone.unread.enterForeground()
            try await relay.reply(ticket: "5", to: [token])
            #expect(await log.reaches(1))

            await relay.process.stop()
            #expect(await eventually { log.errors.count >= 2 }, "\(log.events)")
            #expect(log.errors.allSatisfy { if case .network = $0 { true } else { false } }, "\(log.errors)")
            await #expect {
                try await phone.unread.getUnreadMessagesCount()
            } throws: { error in
                if case .network = error as? PushRelayError { true } else { false }
            }
            // Back, on the same port: the live stream reconnects by itself.
            try await relay.restart()
            try await relay.reply(ticket: "6", to: [token])
            #expect(await log.reaches(2), "\(log.events)")
            let errors = log.errors.count
            try await relay.reply(ticket: "7", to: [token])
            #expect(await log.reaches(3))
            #expect(log.errors.count == errors)
            // The delegate was told about the errors too.
            #expect(log.delegateEvents.contains { if case .networkError = $0 { true } else { false } })
            try await phone.deauthorize()
        }
    }

    @Test("a user JWT that expires during the live stream is replaced through the token provider, and the stream goes on")
    func tokenRefresh() async throws {
        try await KitRelay.with { relay in
            // Tokens that live 3 seconds; the relay checks the stream's token at every heartbeat (1 s).
            let issuer = TokenIssuer(lifetime: 3)
            let (phone, token, log) = try await relay.signedInDevice(user: "erin", issuer: issuer)
            await phone.unread.enterForeground()
            try await relay.reply(ticket: "5", to: [token])
            #expect(await log.reaches(1))
            #expect(issuer.issued.count == 1)

            #expect(await eventually { issuer.issued.count >= 3 }, "\(issuer.issued)")
            try await relay.reply(ticket: "6", to: [token])
            #expect(await log.reaches(2))
            _ = try await phone.unread.markRead(ticket: "5")
            #expect(await log.reaches(1))
            #expect(log.errors.isEmpty, "\(log.errors)")
            #expect(Set(issuer.issued) == ["erin"])
            try await phone.deauthorize()
        }
    }

    @Test("a token the relay refuses: the provider is asked once more, then the call fails as unauthorized with the relay's message")
    func refusedToken() async throws {
        try await KitRelay.with { relay in
            let calls = Mutex(0)
            let phone = relay.client()
            let log = await EventLog(phone.unread)
            try await phone.authorize(userID: "gus") { _ in
                calls.withLock { $0 += 1 }
                return "not-a-jwt"
            }
            // The load at sign-in fails first, reported to the app.
            #expect(await eventually { log.errors.contains { if case .unauthorized = $0 { true } else { false } } }, "\(log.errors)")
            let before = calls.withLock { $0 }
            do {
                _ = try await phone.unread.getUnreadMessagesCount()
                Issue.record("a refused token gave a count")
            } catch {
                guard case .unauthorized(let message)? = error as? PushRelayError else {
                    Issue.record("expected .unauthorized, got \(error)")
                    return
                }
                #expect(!message.isEmpty && message != "401", "\(message)")
            }
            // The refused token is forgotten, a fresh one refused too: two calls, no more.
            #expect(calls.withLock { $0 } == before + 2)
            try? await phone.deauthorize()
        }
    }

    @Test("the example: two devices, replies, a read on one seen on the other, a user switch")
    func example() async throws {
        let executable = try builtExecutable("push-relay-kit-example")
        let run = try await KitRelay.with { relay in
            let (baseURL, keyFile) = (relay.baseURL, relay.userTokenKeyFile)
            return try await Task.detached {
                try await CommandLineTests.run(
                    [
                        "--relay", baseURL.absoluteString, "--app", "support", "--webhook-secret", TestApp.webhookSecret,
                        "--user-token-key-file", keyFile, "--delay", "1",
                    ],
                    in: NSTemporaryDirectory(),
                    executable: executable
                )
            }.value
        }
        #expect(run.status == 0, "\(run.output)\n\(run.error)")
        let lines = run.output.split(separator: "\n").map(String.init)
        func totals(_ device: String) -> [String] {
            lines.filter { $0.hasPrefix("[\(device)]") && $0.contains("unread ") }.compactMap {
                $0.split(separator: "unread ").last.map { String($0.prefix { $0.isNumber }) }
            }
        }
        #expect(totals("phone") == ["0", "1", "2", "1", "0"], "\(run.output)")
        #expect(totals("tablet") == ["0", "1", "2", "1", "0", "1"], "\(run.output)")
        #expect(lines.last?.hasPrefix("done: 2 devices, 1 user switch") == true, "\(run.output)")
        #expect(!run.output.contains("network error"), "\(run.output)")
    }

    @Test("requests cancelled while their answers arrive (mode changes, a task cancelled) never hang the client", .timeLimit(.minutes(2)))
    func cancellationNeverHangs() async throws {
        try await KitRelay.with { relay in
            let phone = relay.client()
            let log = await EventLog(phone.unread)
            try await phone.authorize(userID: "fay", tokenProvider: TokenIssuer().provider)
            try await relay.reply(ticket: "5", to: [PushRelayClient.identifier(forDeviceToken: randomAPNsToken())])
            // Each cancellation lands somewhere between sending and the answer's arrival, where
            // URLSession.data(for:) on Linux deadlocked the cancelling thread and the session's queue.
            var answered = 0
            for _ in 0..<300 {
                let request = Task { try await phone.unread.getUnreadMessagesCount() }
                try await Task.sleep(for: .microseconds(Int.random(in: 0...3000)))
                request.cancel()
                if (try? await request.value) != nil { answered += 1 }
            }
            // Mode changes cancel the counter's own requests and streams the same way.
            await phone.unread.setUnreadMessageCountDelay(1)
            for _ in 0..<100 {
                await phone.unread.enterForeground()
                try await Task.sleep(for: .microseconds(Int.random(in: 0...3000)))
                await phone.unread.enterBackground()
            }
            #expect(answered > 0 && answered < 300, "\(answered) of 300 answered before the cancellation")
            #expect(try await phone.unread.getUnreadMessagesCount().total == 0)
            #expect(!log.errors.contains { if case .network = $0 { true } else { false } }, "\(log.errors)")
            try await phone.deauthorize()
        }
    }
}
