import ArgumentParser
import Foundation
import Histogram
import NIOCore
import NIOHTTP1
import NIOPosix

/// `push-relay-bench`: load generators that print throughput and latency percentiles.
@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-relay-bench",
        abstract: "Benchmarks for a running PushRelay.",
        subcommands: [Ingest.self, Sender.self, EndToEnd.self, Poll.self]
    )
}

/// The relay under load and its app: `--url`, `--app`, `--secret`.
struct RelayApp: ParsableArguments {
    @Option(help: "Base URL of the relay.")
    var url = "http://127.0.0.1:8080"

    @Option(help: "App id.")
    var app: String

    @Option(help: "The app's webhook secret.")
    var secret: String

    var webhookPath: String { "/v1/webhooks/zendesk/\(app)/\(secret)" }

    func hostAndPort() throws -> (host: String, port: Int) {
        guard let components = URLComponents(string: url), let host = components.host else {
            throw ValidationError("--url must look like http://127.0.0.1:8080")
        }
        return (host, components.port ?? 80)
    }
}

/// Drives webhooks at a relay and reports accepted webhooks per second and accept latency.
struct Ingest: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "POST N Zendesk webhooks at concurrency C (or at a fixed rate) and print throughput and latency percentiles.",
        discussion: """
            Without --rate, C workers send back to back (closed loop): the figure is the most webhooks per second the relay \
            acknowledges. With --rate, requests are scheduled at that rate (open loop) and latency is measured from each \
            request's scheduled time, so a stall is not hidden by the load generator slowing down.
            """
    )

    @OptionGroup var relay: RelayApp

    @Option(name: [.customShort("n"), .customLong("requests")], help: "Webhooks to send.")
    var requests = 20_000

    @Option(name: [.customShort("c"), .customLong("concurrency")], help: "Connections, each with one request in flight.")
    var concurrency = 64

    @Option(help: "Webhooks per second (open loop); omit for as fast as possible.")
    var rate: Double?

    @Option(help: "Devices per webhook.")
    var devices = 1

    @Option(help: "Distinct device tokens to draw from.")
    var tokenPool = 10_000

    @Option(help: "Webhooks sent first and left out of the figures.")
    var warmup = 1_000

    func validate() throws {
        guard requests > 0, concurrency > 0, devices > 0, tokenPool > 0 else { throw ValidationError("counts must be positive") }
        if let rate, rate <= 0 { throw ValidationError("--rate must be positive") }
    }

    func run() async throws {
        let (host, port) = try relay.hostAndPort()
        let load = WebhookLoad(
            target: .init(host: host, port: port, path: relay.webhookPath),
            concurrency: concurrency, body: webhook(number:)
        )
        if warmup > 0 {
            _ = try await load.drive(count: warmup, offset: 0, rate: nil)
        }
        report(try await load.drive(count: requests, offset: warmup, rate: rate))
    }

    private func webhook(number: Int) -> String {
        let targets = (0..<devices).map { device in
            #"{"identifier":"bench-\#((number * devices + device) % tokenPool)","type":"\#(device % 2 == 0 ? "android" : "ios")"}"#
        }
        return #"{"devices":[\#(targets.joined(separator: ","))],"notification":{"title":"Agent replied","body":"Reply \#(number) on your ticket","ticket_id":"\#(number % 5000)"}}"#
    }

    private func report(_ result: WebhookLoad.Result) {
        let histogram = result.histogram
        func ms(_ percentile: Double) -> String { String(format: "%.2f ms", Double(histogram.valueAtPercentile(percentile)) / 1000) }
        let total = result.accepted + result.failed.values.reduce(0, +)
        print("ingest: \(total) webhooks (\(devices) device\(devices == 1 ? "" : "s") each), concurrency \(concurrency)" + (rate.map { ", target rate \(Int($0))/s" } ?? ", closed loop"))
        print(String(format: "  elapsed     %.2f s", result.elapsed))
        print(String(format: "  throughput  %.0f webhooks/s accepted (202)", Double(result.accepted) / result.elapsed))
        print("  latency     p50 \(ms(50))  p90 \(ms(90))  p99 \(ms(99))  p99.9 \(ms(99.9))  max \(String(format: "%.2f ms", Double(histogram.max) / 1000))")
        if result.failed.isEmpty {
            print("  failures    none")
        } else {
            print("  failures    " + result.failed.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))
        }
    }
}

/// One request of a load.
struct LoadRequest: Sendable {
    var method: HTTPMethod
    var path: String
    var headers: [(String, String)]
    var body: String?
}

/// Keep-alive HTTP/1.1 connections sending requests (webhooks, by default): plain SwiftNIO, so the
/// load generator spends little of the CPU it shares with the relay.
struct WebhookLoad: Sendable {
    var target: Target
    var concurrency: Int
    /// Request number n.
    var request: @Sendable (Int) -> LoadRequest
    /// The statuses counted as accepted; any other is a failure.
    var accepted: Set<Int> = [202]
    /// Called with each request's number and the instant it counts as sent.
    var onSend: @Sendable (Int, ContinuousClock.Instant) -> Void = { _, _ in }
    /// Called with each request's number and the head of its answer.
    var onAnswer: @Sendable (Int, HTTPResponseHead) -> Void = { _, _ in }
    /// No request is sent after this instant.
    var deadline: ContinuousClock.Instant? = nil

    /// Webhooks: a POST of `body(n)` as JSON to the target's path.
    init(target: Target, concurrency: Int, body: @escaping @Sendable (Int) -> String, onSend: @escaping @Sendable (Int, ContinuousClock.Instant) -> Void = { _, _ in }) {
        self.target = target
        self.concurrency = concurrency
        request = { LoadRequest(method: .POST, path: target.path, headers: [("Content-Type", "application/json")], body: body($0)) }
        self.onSend = onSend
    }

    init(
        target: Target, concurrency: Int, accepted: Set<Int>, request: @escaping @Sendable (Int) -> LoadRequest,
        onAnswer: @escaping @Sendable (Int, HTTPResponseHead) -> Void
    ) {
        self.target = target
        self.concurrency = concurrency
        self.accepted = accepted
        self.request = request
        self.onAnswer = onAnswer
    }

    struct Target: Sendable {
        var host: String
        var port: Int
        var path: String
    }

    struct Result {
        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        var accepted = 0
        var failed: [String: Int] = [:]
        var elapsed: Double = 0
    }

    /// Runs `concurrency` keep-alive HTTP/1.1 connections (plain SwiftNIO, so the load generator
    /// spends little of the CPU it shares with the relay), each sending its next webhook when the
    /// previous answer arrived (or at its scheduled time with --rate).
    func drive(count: Int, offset: Int, rate: Double?) async throws -> Result {
        let counter = Counter()
        let start = ContinuousClock.now
        var result = try await withThrowingTaskGroup(of: Result.self) { group in
            for _ in 0..<min(concurrency, count) {
                group.addTask {
                    try await connection(counter: counter, count: count, offset: offset, rate: rate, start: start)
                }
            }
            var merged = Result()
            for try await partial in group {
                merged.histogram.add(partial.histogram)
                merged.accepted += partial.accepted
                merged.failed.merge(partial.failed, uniquingKeysWith: +)
            }
            return merged
        }
        result.elapsed = (ContinuousClock.now - start).seconds
        return result
    }

    private func connection(counter: Counter, count: Int, offset: Int, rate: Double?, start: ContinuousClock.Instant) async throws -> Result {
        let load = self
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connect(host: target.host, port: target.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    let driver = LoadDriver(
                        load: load, counter: counter, count: count, offset: offset, rate: rate, start: start,
                        finished: channel.eventLoop.makePromise()
                    )
                    try channel.pipeline.syncOperations.addHandler(driver)
                    return driver.finished.futureResult
                }
            }
        return try await channel.get()
    }
}

/// Drives one keep-alive connection entirely on its event loop: sends a webhook, records the
/// answer, sends the next. No task hops per request, so the load generator takes less of the CPU
/// it shares with the relay than an async client would.
private final class LoadDriver: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    let load: WebhookLoad
    let counter: Counter
    let count: Int
    let offset: Int
    let rate: Double?
    let start: ContinuousClock.Instant
    let finished: EventLoopPromise<WebhookLoad.Result>
    private var result = WebhookLoad.Result()
    private var status = 0
    private var current = 0
    private var sent = ContinuousClock.now
    private var waiting = false
    private var done = false

    init(
        load: WebhookLoad, counter: Counter, count: Int, offset: Int, rate: Double?, start: ContinuousClock.Instant,
        finished: EventLoopPromise<WebhookLoad.Result>
    ) {
        self.load = load
        self.counter = counter
        self.count = count
        self.offset = offset
        self.rate = rate
        self.start = start
        self.finished = finished
    }

    func channelActive(context: ChannelHandlerContext) {
        sendNext(context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let response):
            status = Int(response.status.code)
            load.onAnswer(current, response)
        case .body:
            break
        case .end:
            waiting = false
            _ = result.histogram.record(UInt64(max(1, (ContinuousClock.now - sent).microseconds)))
            if load.accepted.contains(status) { result.accepted += 1 } else { result.failed["\(status)", default: 0] += 1 }
            status = 0
            sendNext(context: context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if waiting { result.failed["connection closed", default: 0] += 1 }
        finish(context: context)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func sendNext(context: ChannelHandlerContext) {
        if let deadline = load.deadline, ContinuousClock.now >= deadline {
            finish(context: context)
            return
        }
        guard let index = counter.next(limit: count) else {
            finish(context: context)
            return
        }
        guard let rate else {
            send(index: index, at: ContinuousClock.now, context: context)
            return
        }
        let scheduled = start + .nanoseconds(Int64(Double(index) / rate * 1e9))
        let delay = scheduled - ContinuousClock.now
        if delay <= .zero {
            send(index: index, at: scheduled, context: context)
        } else {
            context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(delay.components.attoseconds / 1_000_000_000 + delay.components.seconds * 1_000_000_000)) {
                self.send(index: index, at: scheduled, context: context)
            }
        }
    }

    private func send(index: Int, at instant: ContinuousClock.Instant, context: ChannelHandlerContext) {
        let request = load.request(offset + index)
        let body = request.body.map { ByteBuffer(string: $0) }
        load.onSend(offset + index, instant)
        var head = HTTPRequestHead(version: .http1_1, method: request.method, uri: request.path)
        head.headers = HTTPHeaders([("Host", load.target.host)] + request.headers)
        if let body { head.headers.add(name: "Content-Length", value: "\(body.readableBytes)") }
        current = offset + index
        sent = instant
        waiting = true
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if let body { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    private func finish(context: ChannelHandlerContext) {
        guard !done else { return }
        done = true
        finished.succeed(result)
        context.close(promise: nil)
    }
}

/// Hands out request numbers to the workers.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0

    func next(limit: Int) -> Int? {
        lock.lock()
        defer { lock.unlock() }
        guard value < limit else { return nil }
        value += 1
        return value - 1
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
    var microseconds: Int64 { components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000 }
}
