import Foundation
import Postgres
import PushRelay
import TestSupport
import Testing

/// A `push-relay serve` process on a database of its own, with the app `support` and an app API
/// key, for tests that talk to it as a hostile client would.
struct HostileRelay {
    static let secret = TestApp.webhookSecret
    let relay: RelayProcess
    let test: TestApp
    let apiKey: String
    let directory: String

    var port: Int { relay.port }
    var log: String { (try? String(contentsOfFile: relay.log, encoding: .utf8)) ?? "" }

    /// `appYAML` replaces the default app entry; `extraYAML` adds top-level sections.
    static func start(
        logLevel: String = "warning",
        appYAML: String? = nil,
        extraYAML: String = "http:\n  header_timeout_seconds: 2\n  body_timeout_seconds: 2",
        delivery: Bool = false
    ) async throws -> HostileRelay {
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-hostile-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let test = try await TestApp.make()
        let configFile = directory + "/push-relay.yaml"
        try """
        database:
          url: "\(test.conninfo)"
          max_connections: 6
        delivery:
          enabled: \(delivery)
        \(extraYAML)
        apps:
        \(appYAML ?? """
          - id: support
            webhook_secrets: ["\(secret)"]
        """)
        """.write(toFile: configFile, atomically: true, encoding: .utf8)
        let relay = try await RelayProcess.start(
            configFile: configFile,
            port: try EmbeddedPostgres.freePort(),
            log: directory + "/relay.log",
            logLevel: logLevel
        )
        let apiKey = try await test.key(app: "support")
        return HostileRelay(relay: relay, test: test, apiKey: apiKey, directory: directory)
    }

    func send(_ bytes: [UInt8], timeout: Duration = hangCeiling) async throws -> RawHTTP.Answer? {
        try await RawHTTP.send(port: port, bytes, timeout: .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000))
    }
}

/// One generated request and what it may get.
struct FuzzCase: Sendable {
    var label: String
    var bytes: [UInt8]
    /// The HTTP framing itself is broken: the server may close without answering.
    var brokenFraming = false
    /// A valid webhook: it must get 202.
    var mustBeAccepted = false
    /// Input the rules refuse: it must get a 4xx.
    var mustBeRefused = false
}

enum Fuzz {
    static let hookPath = "/v1/webhooks/zendesk/support/\(HostileRelay.secret)"

    static func hexToken(_ rng: inout SeededGenerator) -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &rng)) }.joined()
    }

    static func androidToken(_ rng: inout SeededGenerator) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:")
        return String((0..<Int.random(in: 20...160, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! })
    }

    /// A JSON string literal for `text`, escaping what JSON requires.
    static func literal(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    static func webhook(title: String = "Agent replied", body: String = "Hello", ticket: String = "5", devices: [(String, String)]) -> String {
        let list = devices.map { #"{"identifier":\#(literal($0.0)),"type":\#(literal($0.1))}"# }.joined(separator: ",")
        return #"{"devices":[\#(list)],"notification":{"title":\#(literal(title)),"body":\#(literal(body)),"ticket_id":\#(literal(ticket))}}"#
    }

    static func validWebhook(_ rng: inout SeededGenerator, ticket: String) -> String {
        let devices = (0..<Int.random(in: 1...3, using: &rng)).map { _ in
            Bool.random(using: &rng) ? (hexToken(&rng), "ios") : (androidToken(&rng), "android")
        }
        return webhook(title: "Reply \(ticket)", body: "Body of \(ticket) ✓", ticket: ticket, devices: devices)
    }

    static func post(_ path: String, _ body: [UInt8], type: String? = "application/json", headers: [(String, String)] = []) -> [UInt8] {
        RawHTTP.request("POST", path, headers: (type.map { [("Content-Type", $0)] } ?? []) + headers, body: body)
    }

    /// A hostile request: each kind aims at one class of input a relay must refuse cleanly (or,
    /// for odd but legal input, accept).
    static func hostile(_ rng: inout SeededGenerator, apiKey: String) -> FuzzCase {
        let auth = [("Authorization", "Bearer \(apiKey)")]
        let valid = Array(validWebhook(&rng, ticket: "h\(rng.next() % 1_000_000)").utf8)
        switch rng.next() % 16 {
        case 0:
            let bytes = (0..<Int.random(in: 0...2000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            // Random bytes are almost never a JSON object with the webhook's fields.
            return FuzzCase(label: "random bytes", bytes: post(hookPath, bytes), mustBeRefused: true)
        case 1:
            let prefix = Array(valid.prefix(Int.random(in: 0..<valid.count, using: &rng)))
            return FuzzCase(label: "truncated JSON", bytes: post(hookPath, prefix), mustBeRefused: true)
        case 2:
            let depth = [10, 63, 64, 65, 1000, 100_000].randomElement(using: &rng)!
            let closed = Bool.random(using: &rng)
            let text = String(repeating: "[", count: depth) + (closed ? String(repeating: "]", count: depth) : "")
            let body = Bool.random(using: &rng) ? text : #"{"devices":\#(text),"notification":{"title":"t","body":"b","ticket_id":"1"}}"#
            return FuzzCase(label: "deep nesting \(depth)", bytes: post(hookPath, Array(body.utf8)), mustBeRefused: true)
        case 3:
            // Control characters and NUL, escaped (legal JSON) or raw (not), in every string field.
            let control = Unicode.Scalar(UInt8([0, 1, 7, 8, 9, 10, 13, 27, 31, 127].randomElement(using: &rng)!))
            let text = "a\(Character(control))b"
            var title = "t"
            var body = "b"
            var ticket = "7"
            var identifier = hexToken(&rng)
            var type = "ios"
            let field = rng.next() % 5
            switch field {
            case 0: title = text
            case 1: body = text
            case 2: ticket = text
            case 3: identifier = text
            default: type = text
            }
            var json = webhook(title: title, body: body, ticket: ticket, devices: [(identifier, type)])
            let raw = Bool.random(using: &rng)
            if raw { json = json.replacingOccurrences(of: String(format: "\\u%04x", control.value), with: String(Character(control))) }
            // Free text takes any character but NUL; raw characters below U+0020 are not JSON; ids,
            // tokens and types take no control character at all.
            let acceptable = field < 2 && control.value != 0 && (control.value == 127 || !raw)
            return FuzzCase(
                label: "control character \(control.value) in field \(field)\(raw ? ", raw" : "")",
                bytes: post(hookPath, Array(json.utf8)),
                mustBeAccepted: acceptable,
                mustBeRefused: !acceptable
            )
        case 4:
            let number = ["1e999999", String(repeating: "9", count: 400), "-0", "1.5", "-1e-999999", "0"].randomElement(using: &rng)!
            let json =
                #"{"devices":[{"identifier":"\#(hexToken(&rng))","type":"ios"}],"notification":{"title":"t","body":"b","ticket_id":\#(number)}}"#
            return FuzzCase(label: "number as ticket_id", bytes: post(hookPath, Array(json.utf8)), mustBeRefused: true)
        case 5:
            let text = String(decoding: valid, as: UTF8.self)
            let json =
                Bool.random(using: &rng)
                ? text.replacingOccurrences(of: #""notification":{"#, with: #""notification":{"title":"dup","#)
                : String(text.dropLast()) + #","devices":[]}"#
            return FuzzCase(label: "duplicate keys", bytes: post(hookPath, Array(json.utf8)), mustBeRefused: true)
        case 6:
            let size = (1 << 20) + Int.random(in: 1...200_000, using: &rng)
            let json = Array(webhook(title: String(repeating: "x", count: size), devices: [(hexToken(&rng), "ios")]).utf8)
            return FuzzCase(label: "oversize body", bytes: post(hookPath, json), mustBeRefused: true)
        case 7:
            let text = String(decoding: valid, as: UTF8.self)
            let broken: [UInt8]
            switch rng.next() % 9 {
            case 0: broken = Array(text.replacingOccurrences(of: "}]", with: "},]").utf8)
            case 1: broken = Array(("/* c */" + text).utf8)
            case 2: broken = Array(text.replacingOccurrences(of: #""ticket_id":"#, with: #""x":NaN,"ticket_id":"#).utf8)
            case 3: broken = Array(text.replacingOccurrences(of: #""ticket_id":"#, with: #""x":01,"ticket_id":"#).utf8)
            case 4: broken = [0xEF, 0xBB, 0xBF] + Array(text.utf8)
            case 5: broken = Array(text.replacingOccurrences(of: #""title":""#, with: #""title":"\ud800"#).utf8)
            case 6: broken = Array(text.replacingOccurrences(of: #""title":""#, with: "\"title\":\"\u{FFFF}").utf8).map { $0 == 0xEF ? 0xC0 : $0 }
            case 7: broken = Array(text.replacingOccurrences(of: "\"title\":\"", with: "'title':\"").utf8)
            default:
                var bytes = valid
                if let quote = bytes.firstIndex(of: UInt8(ascii: "R")) { bytes.insert(contentsOf: [0xED, 0xA0, 0x80], at: quote) }
                broken = bytes
            }
            return FuzzCase(label: "not JSON", bytes: post(hookPath, broken), mustBeRefused: true)
        case 8:
            let json = [
                #"{"devices":{},"notification":{"title":"t","body":"b","ticket_id":"1"}}"#,
                #"{"devices":[],"notification":{"title":"t","body":"b","ticket_id":"1"}}"#,
                #"{"devices":[{"identifier":"abc","type":"windows"}],"notification":{"title":"t","body":"b","ticket_id":"1"}}"#,
                #"{"devices":[{"identifier":12,"type":"ios"}],"notification":"x"}"#,
                #"{"devices":[null],"notification":{"title":"t","body":"b","ticket_id":"1"}}"#,
                #"[1,2,3]"#, #""just a string""#, "null", "{}",
            ].randomElement(using: &rng)!
            return FuzzCase(label: "wrong shape", bytes: post(hookPath, Array(json.utf8)), mustBeRefused: true)
        case 9:
            // Chunked, split at random places: a legal request, which must be accepted.
            var chunks: [[UInt8]] = []
            var rest = valid[...]
            while !rest.isEmpty {
                let size = Int.random(in: 1...max(1, rest.count), using: &rng)
                chunks.append(Array(rest.prefix(size)))
                rest = rest.dropFirst(size)
            }
            return FuzzCase(
                label: "chunked body",
                bytes: RawHTTP.request("POST", hookPath, headers: [("Content-Type", "application/json")], chunks: chunks),
                mustBeAccepted: true
            )
        case 10:
            let secret = HostileRelay.secret
            let path = [
                "//v1/webhooks/zendesk/support/\(secret)", "/v1//webhooks/zendesk/support/\(secret)",
                "/v1/webhooks/zendesk/support//\(secret)", "/V1/webhooks/zendesk/support/\(secret)",
                "/./v1/webhooks/zendesk/support/\(secret)", "/v1/webhooks/zendesk/support/\(secret)/",
                "/v1/webhooks/zendesk/support/\(secret)?x=%00", "/v1/webhooks/zendesk/sup%70ort/\(secret)",
                "/v1/webhooks/zendesk/support/%ZZ", "/v1/webhooks/zendesk/support/a%00b", "/v1/webhooks/zendesk/support/%C3%28",
                "/v1/webhooks/zendesk/support/\(secret)/extra", "/" + String(repeating: "x", count: 6000), "/v1/webhooks/zendesk/%2e%2e/\(secret)",
            ].randomElement(using: &rng)!
            return FuzzCase(label: "odd path", bytes: post(path, valid))
        case 11:
            let token = [
                hexToken(&rng), androidToken(&rng), "a%00b", "%FF%FE", String(repeating: "x", count: 2000), "Jos%C3%A9", "tok%2Fen", "%", "a%0Ab",
            ].randomElement(using: &rng)!
            let user = [
                #""José Ünal / 42""#, #""a\u0000b""#, #""a\nb""#, "\"" + String(repeating: "u", count: 300) + "\"", "12", "null", #""""#,
            ].randomElement(using: &rng)!
            let platform = [#""ios""#, #""android""#, #""windows""#, "7", "null"].randomElement(using: &rng)!
            let locale = [#""en-US""#, #""x\u0000""#, #""a b""#, "null", "[]"].randomElement(using: &rng)!
            let body = #"{"platform":\#(platform),"user_id":\#(user),"locale":\#(locale)}"#
            return FuzzCase(
                label: "device registration",
                bytes: RawHTTP.request(
                    "PUT",
                    "/v1/apps/support/devices/\(token)",
                    headers: [("Content-Type", "application/json")] + auth,
                    body: Array(body.utf8)
                )
            )
        case 12:
            let user = ["alice", "Jos%C3%A9%20%C3%9Cnal%20%2F%2042", "a%00b", "%E0%80%80", "a%0Db", String(repeating: "u", count: 1500)]
                .randomElement(using: &rng)!
            let ticket = ["5", "a%09b", "%00", String(repeating: "9", count: 300), "t%C3%A9"].randomElement(using: &rng)!
            let body = [#"{"device":"\#(hexToken(&rng))"}"#, #"{"device":"a\u0000"}"#, "{", "", #"{"device":7}"#].randomElement(using: &rng)!
            return FuzzCase(
                label: "read",
                bytes: RawHTTP.request(
                    "POST",
                    "/v1/apps/support/users/\(user)/tickets/\(ticket)/read",
                    headers: [("Content-Type", "application/json")] + auth,
                    body: Array(body.utf8)
                )
            )
        case 13:
            let request = [
                post(hookPath, valid, type: "text/plain"), post(hookPath, valid, type: nil), RawHTTP.request("TRACE", "/health"),
                RawHTTP.request("PATCH", hookPath, body: valid), RawHTTP.request("GET", hookPath),
                RawHTTP.request("GET", "/v1/admin/jobs?limit=501", headers: auth),
                RawHTTP.request("GET", "/v1/apps/support/users/%00/devices", headers: auth),
            ].randomElement(using: &rng)!
            return FuzzCase(label: "method or type", bytes: request)
        case 14:
            // Broken framing: a bad chunk size, a body shorter than its Content-Length, a header
            // line without a colon.
            let head = "POST \(hookPath) HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
            let bytes = [
                head + "Transfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n",
                head + "Content-Length: 100\r\n\r\n{\"a\":1}",
                head + "Content-Length: 5\r\nContent-Length: 7\r\n\r\n{\"a\":1}",
                "POST \(hookPath) HTTP/1.1\r\nHost x\r\n\r\n",
            ].randomElement(using: &rng)!
            return FuzzCase(label: "broken framing", bytes: Array(bytes.utf8), brokenFraming: true)
        default:
            // Valid JSON with more devices than allowed, or every device a duplicate.
            let token = hexToken(&rng)
            let devices = Bool.random(using: &rng) ? (0..<1001).map { _ in (hexToken(&rng), "ios") } : Array(repeating: (token, "ios"), count: 50)
            return FuzzCase(label: "many devices", bytes: post(hookPath, Array(webhook(devices: devices).utf8)))
        }
    }
}

@Suite("Hostile input")
struct HostileInputTests {
    /// One fuzz round: `hostile` generated requests and `valid` webhooks, sent 16 at a time in a
    /// shuffled order, so hostile ones share group commits with valid ones.
    static func round(_ relay: HostileRelay, seed: UInt64, hostile: Int, valid: Int) async throws -> (accepted: [Int64: Int], answers: Int) {
        var rng = SeededGenerator(state: seed)
        var cases = (0..<hostile).map { _ in Fuzz.hostile(&rng, apiKey: relay.apiKey) }
        cases += (0..<valid).map { index in
            FuzzCase(
                label: "valid neighbour",
                bytes: Fuzz.post(Fuzz.hookPath, Array(Fuzz.validWebhook(&rng, ticket: "v\(seed % 100_000)-\(index)").utf8)),
                mustBeAccepted: true
            )
        }
        cases.shuffle(using: &rng)
        var accepted: [Int64: Int] = [:]
        var answers = 0
        try await withThrowingTaskGroup(of: (FuzzCase, RawHTTP.Answer?).self) { group in
            var next = 0
            func add() {
                let item = cases[next]
                next += 1
                group.addTask { (item, try await relay.send(item.bytes)) }
            }
            while next < min(16, cases.count) { add() }
            while let (item, answer) = try await group.next() {
                if next < cases.count { add() }
                guard let answer else {
                    #expect(item.brokenFraming, "seed \(seed): \(item.label) got no answer")
                    continue
                }
                answers += 1
                #expect(answer.status < 500, "seed \(seed): \(item.label) got \(answer.status) \(answer.text.prefix(300))")
                if item.mustBeAccepted {
                    #expect(answer.status == 202, "seed \(seed): \(item.label) got \(answer.status) \(answer.text.prefix(300))")
                }
                if item.mustBeRefused { #expect((400..<500).contains(answer.status), "seed \(seed): \(item.label) got \(answer.status)") }
                if answer.status >= 400 && !item.brokenFraming {
                    let error = try? JSONDecoder().decode(ErrorEnvelope.self, from: Data(answer.body))
                    #expect(
                        error != nil && error?.error.code.isEmpty == false,
                        "seed \(seed): \(item.label) got a non-JSON \(answer.status): \(answer.text.prefix(200))"
                    )
                    #expect(answer.header("content-type")?.hasPrefix("application/json") == true)
                }
                if answer.status == 202,
                    let object = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any],
                    let id = (object["notification_id"] as? NSNumber)?.int64Value, let deliveries = (object["deliveries"] as? NSNumber)?.intValue
                {
                    accepted[id] = deliveries
                }
            }
        }
        return (accepted, answers)
    }

    @Test("generated hostile requests beside valid webhooks: never a 5xx, refusals are 4xx JSON errors, valid ones 202, stored rows equal the 202s")
    func fuzz() async throws {
        let relay = try await HostileRelay.start()
        defer { relay.relay.stop() }
        let random = ProcessInfo.processInfo.environment["PUSH_RELAY_FUZZ_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64.max)
        print("hostile input fuzz: fixed seed 20261124, random seed \(random) (replay with PUSH_RELAY_FUZZ_SEED=\(random))")
        let clock = ContinuousClock()
        var accepted: [Int64: Int] = [:]
        let elapsed = try await clock.measure {
            for seed in [20_261_124, random] {
                let result = try await Self.round(relay, seed: seed, hostile: 400, valid: 150)
                accepted.merge(result.accepted) { $1 }
            }
        }
        print("hostile input fuzz: 1,100 requests in \(elapsed), \(accepted.count) webhooks accepted")
        #expect(relay.relay.process.isRunning)
        #expect(try await relay.send(RawHTTP.request("GET", "/health"))?.status == 200)
        // Stored rows equal the 202s exactly: the same notification ids, and per notification as
        // many deliveries as its 202 said.
        let rows = try await relay.test.client.query(
            "SELECT n.id, (SELECT count(*) FROM deliveries d WHERE d.notification_id = n.id)::int FROM notifications n"
        ).rows.map { try $0.decode((Int64, Int).self) }
        #expect(rows.count == accepted.count)
        #expect(Dictionary(uniqueKeysWithValues: rows) == accepted)
        #expect(try await relay.test.count("SELECT count(*) FROM deliveries") == accepted.values.reduce(0, +))
    }
}
