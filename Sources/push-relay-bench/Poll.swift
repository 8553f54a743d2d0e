import ArgumentParser
import Crypto
import Foundation
import Histogram
import NIOHTTP1
import Synchronization

/// App users polling their unread count, nearly all unchanged, while webhooks change some owners.
struct Poll: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Polls of GET …/unread with If-None-Match by many owners while webhooks change some of them: polls/s, latency percentiles, the share "
            + "answered 304, and the relay's CPU per poll.",
        discussion: """
            Each owner is a device registered by a webhook (an Android token with no user, so the owner is the token), polled \
            with a user token (HS256 with the app's user_tokens key) whose sub is that token, as the mobile SDK would. Each poll \
            sends the ETag last seen for its owner. During the polls, webhooks at --webhook-rate each reply to one random owner, \
            so that owner's next poll is a 200.
            """
    )

    @OptionGroup var relay: RelayApp

    @Option(help: ArgumentHelp("The app's user_tokens key file (HS256).", valueName: "path"))
    var userTokenKeyFile: String

    @Option(help: "Owners polling.")
    var owners = 10_000

    @Option(name: [.customShort("c"), .customLong("concurrency")], help: "Connections polling, each with one request in flight.")
    var concurrency = 64

    @Option(help: "Seconds of polling.")
    var seconds = 20

    @Option(help: "Webhooks per second during the polls (open loop), each to one random owner.")
    var webhookRate = 500.0

    @Option(
        help: ArgumentHelp(
            "Polls per second (open loop: each poll has a scheduled instant and its latency counts from there, so a relay that falls behind "
                + "shows it). Without it, each connection polls again as soon as it is answered (closed loop: the most polls per second).",
            valueName: "polls/s"
        )
    )
    var rate: Double?

    @Option(help: "The relay's process id: prints its CPU time per poll over the polling (webhooks included).")
    var relayPID: Int?

    func validate() throws {
        guard owners > 0, concurrency > 0, seconds > 0, webhookRate >= 0, (rate ?? 1) > 0 else { throw ValidationError("counts must be positive") }
    }

    // Over 100 lines on purpose: the benchmark reads as its script, top to bottom (start the
    // processes, load, measure, report), and those steps share a dozen values a split would pass
    // around; each step is marked by a comment.
    func run() async throws {
        let (host, port) = try relay.hostAndPort()
        guard let keyData = FileManager.default.contents(atPath: userTokenKeyFile) else { throw ValidationError("cannot read \(userTokenKeyFile)") }
        let key = SymmetricKey(data: Data(String(decoding: keyData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).utf8))
        let webhookPath = relay.webhookPath
        let owners = self.owners
        let owner = Self.owner
        let webhook = Self.webhook

        // Every owner gets one reply, which registers its device.
        let setup = WebhookLoad(
            target: .init(host: host, port: port, path: webhookPath),
            concurrency: 64,
            body: { webhook(owner($0), $0) }
        )
        let registered = try await setup.drive(count: owners, offset: 0, rate: nil)
        guard registered.accepted == owners else {
            throw ValidationError("setup: \(registered.accepted) of \(owners) webhooks accepted: \(registered.failed)")
        }

        let expires = Int(Date().timeIntervalSince1970) + 3600 + seconds
        let authorizations = (0..<owners).map { "Bearer " + Self.userToken(sub: owner($0), expires: expires, key: key) }
        let etags = Mutex([String?](repeating: nil, count: owners))
        let notModified = Atomic<Int>(0)
        let app = relay.app
        var polls = WebhookLoad(
            target: .init(host: host, port: port, path: ""),
            concurrency: concurrency,
            accepted: [200, 304],
            request: { number in
                let index = number % owners
                var headers = [("Authorization", authorizations[index])]
                if let etag = etags.withLock({ $0[index] }) { headers.append(("If-None-Match", etag)) }
                return LoadRequest(method: .GET, path: "/v1/apps/\(app)/users/\(owner(index))/unread", headers: headers, body: nil)
            },
            onAnswer: { number, answer in
                if answer.status == 304 { notModified.add(1, ordering: .relaxed) }
                if let etag = answer.etag { etags.withLock { $0[number % owners] = etag } }
            }
        )
        var changes = WebhookLoad(
            target: .init(host: host, port: port, path: webhookPath),
            concurrency: 16,
            body: { number in webhook(owner(Int.random(in: 0..<owners)), number) }
        )

        // One unmeasured pass, so every owner has an ETag to send.
        _ = try await polls.drive(count: owners, offset: 0, rate: nil)
        notModified.store(0, ordering: .relaxed)
        let deadline = ContinuousClock.now + .seconds(seconds)
        polls.deadline = deadline
        changes.deadline = deadline

        let cpuBefore = relayPID.flatMap(Self.cpuSeconds)
        let ownBefore = Self.cpuSeconds(pid: Int(getpid()))
        async let changed =
            webhookRate > 0
            ? changes.drive(count: Int(webhookRate * Double(seconds)) + 1, offset: owners, rate: webhookRate) : WebhookLoad.Result()
        let result = try await polls.drive(count: rate.map { Int($0 * Double(seconds)) } ?? Int.max, offset: 0, rate: rate)
        let webhooks = try await changed
        let cpuAfter = relayPID.flatMap(Self.cpuSeconds)
        let ownAfter = Self.cpuSeconds(pid: Int(getpid()))

        let histogram = result.histogram
        func ms(_ percentile: Double) -> String { String(format: "%.2f ms", Double(histogram.valueAtPercentile(percentile)) / 1000) }
        let total = result.accepted + result.failed.values.reduce(0, +)
        let unchanged = notModified.load(ordering: .relaxed)
        let mode = rate.map { "open loop at \(Int($0)) polls/s" } ?? "closed loop"
        print("poll: \(owners) owners, \(concurrency) connections, \(mode), \(seconds) s, webhooks at \(Int(webhookRate))/s to random owners")
        print(
            String(
                format: "  polls       %d in %.2f s: %.0f polls/s, %.1f%% answered 304",
                total,
                result.elapsed,
                Double(total) / result.elapsed,
                Double(unchanged) * 100 / Double(max(total, 1))
            )
        )
        print(
            "  latency     p50 \(ms(50))  p90 \(ms(90))  p99 \(ms(99))  p99.9 \(ms(99.9))  max "
                + "\(String(format: "%.2f ms", Double(histogram.max) / 1000))"
        )
        print(String(format: "  webhooks    %d accepted (%.0f/s)", webhooks.accepted, Double(webhooks.accepted) / max(result.elapsed, 0.001)))
        if let cpuBefore, let cpuAfter {
            print(
                String(
                    format: "  relay CPU   %.1f µs per poll (%.2f s over the polling, webhooks included)",
                    (cpuAfter - cpuBefore) / Double(max(total, 1)) * 1e6,
                    cpuAfter - cpuBefore
                )
            )
        }
        if let ownBefore, let ownAfter {
            print(
                String(
                    format: "  bench CPU   %.1f µs per poll (this load generator, webhooks included, on the same cores)",
                    (ownAfter - ownBefore) / Double(max(total, 1)) * 1e6
                )
            )
        }
        let failures = result.failed.merging(webhooks.failed, uniquingKeysWith: +)
        print(
            "  failures    "
                + (failures.isEmpty ? "none" : failures.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))
        )
    }

    @Sendable static func owner(_ number: Int) -> String { "poll-owner-\(number)" }

    /// A reply to `owner`'s device on one of 50 tickets.
    @Sendable static func webhook(_ owner: String, _ number: Int) -> String {
        #"{"devices":[{"identifier":"\#(owner)","type":"android"}],"notification":{"title":"Agent replied","body":"Reply "#
            + #"\#(number)","ticket_id":"\#(number % 50)"}}"#
    }

    /// A user token as the app's backend would sign it: HS256, `sub` and `exp`.
    static func userToken(sub: String, expires: Int, key: SymmetricKey) -> String {
        func base64URL(_ data: some DataProtocol) -> String {
            Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let header = base64URL(Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let payload = base64URL(Data(#"{"sub":"\#(sub)","exp":\#(expires)}"#.utf8))
        let signature = HMAC<SHA256>.authenticationCode(for: Data("\(header).\(payload)".utf8), using: key)
        return "\(header).\(payload).\(base64URL(Data(signature)))"
    }

    /// The process's user + system CPU time, from /proc/PID/stat.
    static func cpuSeconds(pid: Int) -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, utime field 14, stime field 15.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
