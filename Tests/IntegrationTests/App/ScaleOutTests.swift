import Foundation
import Postgres
import PushSandbox
import Synchronization
import TestSupport
import Testing

@testable import PushRelay

/// Several `push-relay serve` processes on one PostgreSQL database and one sandbox, as the design
/// runs them past one machine: no coordinator, `FOR UPDATE SKIP LOCKED` and leases.
struct RelayCluster {
    let harness: DeliveryHarness
    let configFile: String
    var relays: [RelayProcess]

    /// The webhook path of each app (both apps deliver to the sandbox).
    static let hookPaths = [
        "support": "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)", "other": "/v1/webhooks/zendesk/other/\(TestApp.otherSecret)",
    ]

    static func start(_ count: Int, harness: DeliveryHarness, leaseSeconds: Int = 30) async throws -> RelayCluster {
        let configFile = harness.directory + "/cluster.yaml"
        let apps = try harness.test.apps.map { try harness.appYAML($0) }.joined()
        let sections = """
            zendesk:
              poll_interval_ms: 100
            jobs:
              poll_interval_ms: 100
            """
        try harness.serveYAML(apps: apps, delivery: ["lease_seconds: \(leaseSeconds)"], sections: sections)
            .write(toFile: configFile, atomically: true, encoding: .utf8)
        var relays: [RelayProcess] = []
        for index in 0..<count {
            relays.append(try await Self.launch(configFile: configFile, directory: harness.directory, index: index))
        }
        return RelayCluster(harness: harness, configFile: configFile, relays: relays)
    }

    static func launch(configFile: String, directory: String, index: Int) async throws -> RelayProcess {
        try await RelayProcess.start(
            configFile: configFile,
            port: try EmbeddedPostgres.freePort(),
            log: directory + "/relay-\(index).log"
        )
    }

    /// Stops instance `index` with SIGTERM (graceful) and starts it again on a new port.
    mutating func restart(_ index: Int) async throws {
        relays[index].process.terminate()
        await relays[index].process.waitUntilExit()
        relays[index] = try await Self.launch(configFile: configFile, directory: harness.directory, index: index)
    }

    func stopAll() async {
        for relay in relays { await relay.stop() }
    }

    /// ``stopAll()`` for a `defer`.
    func stopAll() {
        for relay in relays { relay.stop() }
    }

    /// Deliveries instance `index` counted as delivered (every app and platform).
    func delivered(by index: Int) async throws -> Double {
        let text = String(decoding: try await relays[index].request("GET", "/metrics").body, as: UTF8.self)
        return text.split(separator: "\n").filter { $0.hasPrefix("push_relay_push_outcomes_total{") && $0.contains("outcome=\"delivered\"") }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
    }

    var logs: String {
        relays.indices.map { (try? String(contentsOfFile: harness.directory + "/relay-\($0).log", encoding: .utf8)) ?? "" }.joined(separator: "\n")
    }
}

/// The ports of the instances taking webhooks, changed as instances restart.
final class Ports: Sendable {
    private let list: Mutex<[Int]>
    init(_ ports: [Int]) { list = Mutex(ports) }
    var current: [Int] { list.withLock { $0 } }
    func set(_ index: Int, _ port: Int) { list.withLock { $0[index] = port } }
    func removeFirst() { _ = list.withLock { $0.removeFirst() } }
}

/// Hands out item numbers to the connections of a load.
final class Numbers: Sendable {
    private let value = Atomic<Int>(0)
    func next() -> Int { value.add(1, ordering: .relaxed).oldValue }
}

/// One webhook of a load: its app and its device.
struct LoadItem: Sendable {
    var app: String
    var token: String
    var platform: String
}

/// Sends webhooks on keep-alive connections spread over the cluster's instances.
enum ClusterLoad {
    /// The webhook of item `number`: one device, iOS and Android alternately, the two apps alternately.
    static func item(_ number: Int) -> LoadItem {
        let app = number % 4 < 2 ? "support" : "other"
        return number % 2 == 0
            ? LoadItem(app: app, token: apnsToken(), platform: "ios")
            : LoadItem(app: app, token: "android-\(number)-\(UUID().uuidString.prefix(8))", platform: "android")
    }

    /// Sends `items` over `connections` connections per port in `ports()` (asked again for each
    /// connection, so a restarted instance's new port is used), each webhook once, never retried.
    /// Returns the items acknowledged with a 202 and those that were not.
    static func send(
        _ items: [LoadItem],
        connectionsPerPort: Int,
        ports: @escaping @Sendable () -> [Int]
    ) async -> (acknowledged: [LoadItem], unacknowledged: [LoadItem]) {
        let numbers = Numbers()
        let initial = ports()
        return await withTaskGroup(of: ([LoadItem], [LoadItem]).self) { group in
            for slot in 0..<(initial.count * connectionsPerPort) {
                group.addTask {
                    var acknowledged: [LoadItem] = []
                    var unacknowledged: [LoadItem] = []
                    var number = numbers.next()
                    while number < items.count {
                        let current = ports()
                        let port = current[slot % current.count]
                        // A connection per run of webhooks; a refused or closed one leaves the item unacknowledged.
                        do {
                            try await RawConnection.with(port: port) { connection in
                                while number < items.count {
                                    let item = items[number]
                                    let body = Array(webhook(devices: [(item.token, item.platform)], ticket: "\(number)").utf8)
                                    try await connection.send(
                                        RawConnection.request(
                                            "POST",
                                            RelayCluster.hookPaths[item.app]!,
                                            headers: [("Content-Type", "application/json")],
                                            body: body
                                        )
                                    )
                                    let answer = try await connection.next()
                                    if answer?.status == 202 { acknowledged.append(item) } else { unacknowledged.append(item) }
                                    number = numbers.next()
                                    guard answer != nil, answer?.header("Connection")?.lowercased() != "close" else { return }
                                }
                            }
                        } catch {
                            unacknowledged.append(items[number])
                            number = numbers.next()
                            try? await Task.sleep(for: .milliseconds(50))
                        }
                    }
                    return (acknowledged, unacknowledged)
                }
            }
            var result: ([LoadItem], [LoadItem]) = ([], [])
            for await (acknowledged, unacknowledged) in group {
                result.0 += acknowledged
                result.1 += unacknowledged
            }
            return result
        }
    }

    /// Waits (at most `ceiling`, a bound on a hang) until the sandbox has answered a push to each of `tokens`; records
    /// an issue naming how many are missing when it has not. Returns the pushes per token.
    static func waitForPushes(_ tokens: Set<String>, _ state: SandboxState, ceiling: Duration = .seconds(120)) async -> [String: Int] {
        var pushes: [String: Int] = [:]
        let all = await eventually(ceiling: ceiling) {
            pushes = Self.pushes(state)
            return tokens.allSatisfy { pushes[$0] != nil }
        }
        #expect(all, "\(tokens.filter { pushes[$0] == nil }.count) acknowledged pushes missing")
        return pushes
    }

    /// How many answered (2xx) pushes the sandbox saw per device token.
    static func pushes(_ state: SandboxState) -> [String: Int] {
        var counts: [String: Int] = [:]
        for request in state.requests(service: "apns") where request.status == 200 {
            if let token = request.path.split(separator: "/").last { counts[String(token), default: 0] += 1 }
        }
        for request in state.requests(service: "fcm") where request.status == 200 {
            guard let range = request.body.range(of: #""token":""#) else { continue }
            let rest = request.body[range.upperBound...]
            if let end = rest.firstIndex(of: "\"") { counts[String(rest[..<end]), default: 0] += 1 }
        }
        return counts
    }
}

@Suite("Scale-out: several relay processes on one database", .serialized)
struct ScaleOutTests {
    @Test(
        "three instances, 20,000 webhooks spread over them: every push delivered once, each instance a fair share; dead tokens and a bulk job handled once"
    )
    func threeInstances() async throws {
        try await DeliveryHarness.with { harness in
            let cluster = try await RelayCluster.start(3, harness: harness)
            defer { cluster.stopAll() }
            let count = 20_000
            let items = (0..<count).map(ClusterLoad.item)
            // Some iOS tokens are dead: each must reach Zendesk once, whichever instance forwards it.
            let dead = items.filter { $0.platform == "ios" }.prefix(40).map(\.token)
            for token in dead { harness.state.setBehaviour(SandboxBehaviour(status: 410, reason: "Unregistered"), for: token) }
            let ports = cluster.relays.map(\.port)
            let start = ContinuousClock.now
            let (acknowledged, unacknowledged) = await ClusterLoad.send(items, connectionsPerPort: 6, ports: { ports })
            #expect(acknowledged.count == count && unacknowledged.isEmpty)
            let live = Set(acknowledged.map(\.token)).subtracting(dead)
            var pushes: [String: Int] = [:]
            let all = await eventually(ceiling: .seconds(240)) {
                pushes = ClusterLoad.pushes(harness.state)
                return live.allSatisfy { pushes[$0] != nil }
            }
            let elapsed = ContinuousClock.now - start
            #expect(all, "\(live.filter { pushes[$0] == nil }.count) pushes missing after \(elapsed)")
            #expect(pushes.values.allSatisfy { $0 == 1 }, "duplicates: \(pushes.filter { $0.value > 1 }.count)")
            var shares: [Double] = []
            for index in 0..<3 { shares.append(try await cluster.delivered(by: index)) }
            let total = shares.reduce(0, +)
            #expect(total == Double(live.count))
            #expect(shares.allSatisfy { $0 >= 0.2 * total }, "delivered per instance: \(shares)")
            // One provider token for the key and one OAuth exchange for the service account,
            // cluster-wide (three instances, two apps each).
            #expect(harness.state.providerTokenCount(keyID: SandboxCredentials.apnsKeyID) == 1)
            #expect(harness.state.requests(service: "oauth").filter { $0.status == 200 }.count == 1)
            #expect(!harness.state.requests(service: "apns").contains { $0.status == 429 })

            // A bulk-unregister job started on one instance runs once, on whichever instance takes it.
            let admin = try await harness.test.key(app: nil)
            let removed = Array(live.filter { $0.hasPrefix("android-") }.prefix(300))
            let upload = try await cluster.relays[1].request(
                "POST",
                "/v1/admin/apps/support/devices/bulk-unregister",
                body: #"{"tokens":[\#(removed.map { "\"\($0)\"" }.joined(separator: ","))],"propagate_to_zendesk":true}"#,
                bearer: admin
            )
            #expect(upload.status == 202)
            let job = try #require((try JSONSerialization.jsonObject(with: upload.body) as? [String: Any])?["job_id"] as? String)
            var state: [String: Any] = [:]
            #expect(
                try await eventually {
                    state =
                        (try JSONSerialization.jsonObject(
                            with: try await cluster.relays[2].request("GET", "/v1/admin/jobs/\(job)", bearer: admin).body
                        ) as? [String: Any]) ?? [:]
                    return state["status"] as? String == "succeeded" && state["forwarded"] as? Int == state["removed"] as? Int
                },
                "\(state)"
            )
            let supportRemoved = removed.filter { token in acknowledged.contains { $0.token == token && $0.app == "support" } }
            #expect(state["processed"] as? Int == removed.count)
            #expect(state["removed"] as? Int == supportRemoved.count)

            // Each dead token and each removed token reached Zendesk exactly once.
            let forwarded = harness.state.requests(service: "zendesk").filter { $0.status == 200 }.map(\.body)
            for token in dead + supportRemoved {
                #expect(forwarded.reduce(0) { $0 + $1.components(separatedBy: "\"\(token)\"").count - 1 } == 1, "\(token)")
            }
            print("scale-out: \(count) webhooks over 3 instances delivered in \(elapsed); per instance \(shares.map { Int($0) })")
        }
    }

    @Test(
        "rolling restart under load: each instance stopped with SIGTERM and started again in turn; nothing acknowledged is lost, nothing is sent twice"
    )
    func rollingRestart() async throws {
        try await DeliveryHarness.with { harness in
            var cluster = try await RelayCluster.start(3, harness: harness)
            defer { cluster.stopAll() }
            let ports = Ports(cluster.relays.map(\.port))
            let items = (0..<6_000).map(ClusterLoad.item)
            async let load = ClusterLoad.send(items, connectionsPerPort: 3, ports: { ports.current })
            for index in 0..<3 {
                try await Task.sleep(for: .milliseconds(700))
                try await cluster.restart(index)
                let port = cluster.relays[index].port
                ports.set(index, port)
            }
            let (acknowledged, unacknowledged) = await load
            let expected = Set(acknowledged.map(\.token))
            let pushes = await ClusterLoad.waitForPushes(expected, harness.state)
            #expect(pushes.values.allSatisfy { $0 == 1 }, "sent twice: \(pushes.filter { $0.value > 1 }.count)")
            #expect(acknowledged.count > 3_000, "\(acknowledged.count) acknowledged, \(unacknowledged.count) not")
            print(
                "rolling restart: \(acknowledged.count) webhooks acknowledged, \(unacknowledged.count) refused or cut off while an instance restarted"
            )
        }
    }

    @Test(
        "SIGKILL of one instance under load: its claimed deliveries are sent by the others after the lease; duplicates at most what it had in flight"
    )
    func killOneInstance() async throws {
        try await DeliveryHarness.with { harness in
            // A lease of 8 s leaves the survivors' own sends (claimed, queued for up to half the
            // lease, answered after 300 ms) seconds to spare on a loaded machine; with 3 s, a fresh-clone
            // run saw survivors' outcomes written after their lease and 54 pushes sent twice.
            let cluster = try await RelayCluster.start(3, harness: harness, leaseSeconds: 8)
            defer { cluster.stopAll() }
            // The pushes are slow to answer, so the killed instance has sends in flight.
            let items = (0..<3_000).map(ClusterLoad.item)
            for item in items { harness.state.setBehaviour(SandboxBehaviour(status: 200, delayMilliseconds: 300, times: 1), for: item.token) }
            let ports = Ports(cluster.relays.map(\.port))
            async let load = ClusterLoad.send(items, connectionsPerPort: 3, ports: { ports.current })
            try await Task.sleep(for: .seconds(2))
            let victim = cluster.relays[0]
            let pid = victim.process.processIdentifier
            await victim.kill()
            ports.removeFirst()
            let inFlight = Set(
                try await harness.test.client.query(
                    "SELECT device_token FROM deliveries WHERE status = 'sending' AND lease_owner LIKE $1",
                    ["%-\(pid)-%"]
                ).rows.map { try $0.decode(String.self, at: 0) }
            )
            let (acknowledged, _) = await load
            let expected = Set(acknowledged.map(\.token))
            let pushes = await ClusterLoad.waitForPushes(expected, harness.state)
            let twice = pushes.filter { $0.value > 1 }
            let duplicates = twice.values.reduce(0) { $0 + $1 - 1 }
            let elsewhere = twice.keys.filter { !inFlight.contains($0) }
            #expect(!inFlight.isEmpty, "the killed instance had nothing in flight: the test proves nothing")
            #expect(duplicates <= inFlight.count, "\(duplicates) duplicates, \(inFlight.count) in flight at the kill")
            #expect(
                elsewhere.isEmpty && twice.values.allSatisfy { $0 == 2 },
                "\(elsewhere.count) tokens sent twice were not in flight on the killed instance; most sends of one token: \(twice.values.max() ?? 0)"
            )
            print(
                "SIGKILL: \(acknowledged.count) acknowledged, \(inFlight.count) deliveries in flight on the killed instance, \(duplicates) sent twice"
            )
        }
    }

    @Test("the live stream on one instance sees a change made through another, brought by its NOTIFY")
    func streamAcrossInstances() async throws {
        try await DeliveryHarness.with { harness in
            let cluster = try await RelayCluster.start(2, harness: harness)
            defer { cluster.stopAll() }
            let user = try await TestApp.userToken("sse-user")
            let device = "android-sse-\(UUID().uuidString.prefix(8))"
            let registered = try await cluster.relays[1].request(
                "PUT",
                "/v1/apps/support/devices/\(device)",
                body: #"{"platform":"android","user_id":"sse-user"}"#,
                bearer: user
            )
            #expect(registered.status == 201)
            let first = cluster.relays[0].port
            let second = cluster.relays[1]
            // A stream reads the counts again only when the hub signals a change (heartbeats read
            // nothing), and the hub hears of another instance's change only by its NOTIFY: the new
            // total arriving at all is the check. The connection's timeout only bounds a hang.
            try await RawConnection.with(port: first) { connection in
                try await connection.send(
                    RawConnection.request("GET", "/v1/apps/support/users/sse-user/unread/stream", headers: [("Authorization", "Bearer \(user)")])
                )
                _ = try await connection.read(until: { $0.contains(#""total":0"#) })
                let hook = try await second.request("POST", RelayCluster.hookPaths["support"]!, body: webhook(devices: [(device, "android")]))
                #expect(hook.status == 202)
                let changed = try await connection.read(until: { $0.contains(#""total":1"#) })
                #expect(changed?.contains(#""total":1"#) == true, "the stream ended without the new total")
            }
        }
    }
}
