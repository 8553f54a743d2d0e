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
        subcommands: [Ingest.self, Sender.self, EndToEnd.self, Poll.self, AB.self]
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
            concurrency: concurrency,
            body: webhook(number:)
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
        return
            #"{"devices":[\#(targets.joined(separator: ","))],"notification":{"title":"Agent replied","body":"Reply \#(number) on your "#
            + #"ticket","ticket_id":"\#(number % 5000)"}}"#
    }

    private func report(_ result: WebhookLoad.Result) {
        let histogram = result.histogram
        func ms(_ percentile: Double) -> String { String(format: "%.2f ms", Double(histogram.valueAtPercentile(percentile)) / 1000) }
        let total = result.accepted + result.failed.values.reduce(0, +)
        print(
            "ingest: \(total) webhooks (\(devices) device\(devices == 1 ? "" : "s") each), concurrency \(concurrency)"
                + (rate.map { ", target rate \(Int($0))/s" } ?? ", closed loop")
        )
        print(String(format: "  elapsed     %.2f s", result.elapsed))
        print(String(format: "  throughput  %.0f webhooks/s accepted (202)", Double(result.accepted) / result.elapsed))
        print(
            "  latency     p50 \(ms(50))  p90 \(ms(90))  p99 \(ms(99))  p99.9 \(ms(99.9))  max "
                + "\(String(format: "%.2f ms", Double(histogram.max) / 1000))"
        )
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

    /// The request as sent: request line, `Host`, the headers, `Content-Length` with a body.
    func bytes(host: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: 256 + (body?.utf8.count ?? 0))
        buffer.writeString("\(method.rawValue) \(path) HTTP/1.1\r\nHost: \(host)\r\n")
        for (name, value) in headers { buffer.writeString("\(name): \(value)\r\n") }
        if let body { buffer.writeString("Content-Length: \(body.utf8.count)\r\n\r\n\(body)") } else { buffer.writeString("\r\n") }
        return buffer
    }
}

/// What the load generator reads of an answer: the status and the `ETag`.
struct LoadAnswer: Sendable {
    var status: Int
    var etag: String?
}

/// Keep-alive HTTP/1.1 connections sending requests (webhooks, by default): plain SwiftNIO with
/// requests written as bytes and answers read by a minimal parser, so the load generator spends
/// little of the CPU it shares with the relay.
struct WebhookLoad: Sendable {
    var target: Target
    var concurrency: Int
    /// Request number n.
    var request: @Sendable (Int) -> LoadRequest
    /// The statuses counted as accepted; any other is a failure.
    var accepted: Set<Int> = [202]
    /// Called with each request's number and the instant it counts as sent.
    var onSend: @Sendable (Int, ContinuousClock.Instant) -> Void = { _, _ in }
    /// Called with each request's number and its answer.
    var onAnswer: @Sendable (Int, LoadAnswer) -> Void = { _, _ in }
    /// No request is sent after this instant.
    var deadline: ContinuousClock.Instant? = nil

    /// Webhooks: a POST of `body(n)` as JSON to the target's path.
    init(
        target: Target,
        concurrency: Int,
        body: @escaping @Sendable (Int) -> String,
        onSend: @escaping @Sendable (Int, ContinuousClock.Instant) -> Void = { _, _ in }
    ) {
        self.target = target
        self.concurrency = concurrency
        request = { LoadRequest(method: .POST, path: target.path, headers: [("Content-Type", "application/json")], body: body($0)) }
        self.onSend = onSend
    }

    init(
        target: Target,
        concurrency: Int,
        accepted: Set<Int>,
        request: @escaping @Sendable (Int) -> LoadRequest,
        onAnswer: @escaping @Sendable (Int, LoadAnswer) -> Void
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
        /// Further instances of the relay: connection i goes to `([port] + morePorts)[i % count]`.
        var morePorts: [Int] = []

        func port(forConnection index: Int) -> Int {
            let all = [port] + morePorts
            return all[index % all.count]
        }
    }

    struct Result {
        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        var accepted = 0
        var failed: [String: Int] = [:]
        var elapsed: Double = 0
    }

    /// Runs `concurrency` keep-alive HTTP/1.1 connections, each sending its next request when the
    /// previous answer arrived (or at its scheduled time with `rate`).
    func drive(count: Int, offset: Int, rate: Double?) async throws -> Result {
        let counter = Counter()
        let start = ContinuousClock.now
        var result = try await withThrowingTaskGroup(of: Result.self) { group in
            for index in 0..<min(concurrency, count) {
                group.addTask {
                    try await connection(index, counter: counter, count: count, offset: offset, rate: rate, start: start)
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

    private func connection(
        _ index: Int,
        counter: Counter,
        count: Int,
        offset: Int,
        rate: Double?,
        start: ContinuousClock.Instant
    ) async throws -> Result {
        let load = self
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .connect(host: target.host, port: target.port(forConnection: index)) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let driver = LoadDriver(
                        load: load,
                        counter: counter,
                        count: count,
                        offset: offset,
                        rate: rate,
                        start: start,
                        finished: channel.eventLoop.makePromise()
                    )
                    try channel.pipeline.syncOperations.addHandler(driver)
                    return driver.finished.futureResult
                }
            }
        return try await channel.get()
    }
}

/// Drives one keep-alive connection entirely on its event loop: sends a request, reads its answer,
/// sends the next. No task hops and no general HTTP codec per request: the request is written as
/// bytes and the answer read by ``ResponseReader``.
private final class LoadDriver: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let load: WebhookLoad
    let counter: Counter
    let count: Int
    let offset: Int
    let rate: Double?
    let start: ContinuousClock.Instant
    let finished: EventLoopPromise<WebhookLoad.Result>
    private var result = WebhookLoad.Result()
    private var reader = ResponseReader()
    private var current = 0
    private var sent = ContinuousClock.now
    private var waiting = false
    private var done = false

    init(
        load: WebhookLoad,
        counter: Counter,
        count: Int,
        offset: Int,
        rate: Double?,
        start: ContinuousClock.Instant,
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
        var bytes = unwrapInboundIn(data)
        reader.append(&bytes)
        do {
            while let answer = try reader.next() {
                guard waiting else { throw ResponseReader.Failure("an answer to no request") }
                waiting = false
                load.onAnswer(current, answer)
                _ = result.histogram.record(UInt64(max(1, (ContinuousClock.now - sent).microseconds)))
                if load.accepted.contains(answer.status) { result.accepted += 1 } else { result.failed["\(answer.status)", default: 0] += 1 }
                sendNext(context: context)
            }
        } catch {
            result.failed["\(error)", default: 0] += 1
            waiting = false
            finish(context: context)
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
            context.eventLoop.assumeIsolated().scheduleTask(
                in: .nanoseconds(delay.components.attoseconds / 1_000_000_000 + delay.components.seconds * 1_000_000_000)
            ) {
                self.send(index: index, at: scheduled, context: context)
            }
        }
    }

    private func send(index: Int, at instant: ContinuousClock.Instant, context: ChannelHandlerContext) {
        let bytes = load.request(offset + index).bytes(host: load.target.host, allocator: context.channel.allocator)
        load.onSend(offset + index, instant)
        current = offset + index
        sent = instant
        waiting = true
        context.writeAndFlush(wrapOutboundOut(bytes), promise: nil)
    }

    private func finish(context: ChannelHandlerContext) {
        guard !done else { return }
        done = true
        finished.succeed(result)
        context.close(promise: nil)
    }
}

/// Reads HTTP/1.1 answers from a keep-alive connection: the status line, `Content-Length` and
/// `ETag`; the body is skipped. Answers framed any other way (chunked, or until close) are
/// reported as failures: the relay frames every answer these loads get by `Content-Length`.
struct ResponseReader {
    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    private var buffer = ByteBuffer()
    /// Where the search for the end of the head resumes.
    private var scanned = 0

    mutating func append(_ bytes: inout ByteBuffer) {
        if buffer.readableBytes == 0 { buffer = bytes } else { buffer.writeBuffer(&bytes) }
    }

    /// The next complete answer, or `nil` until more bytes arrive.
    mutating func next() throws -> LoadAnswer? {
        let from = scanned
        let parsed: (answer: LoadAnswer, total: Int)?? = try buffer.withUnsafeReadableBytes { bytes in
            guard let headEnd = Self.endOfHead(bytes, from: from) else { return nil }
            var status = 0
            var length = 0
            var etag: String?
            var lineStart = 0
            var first = true
            while lineStart < headEnd {
                var lineEnd = lineStart
                while lineEnd < headEnd, bytes[lineEnd] != 13 { lineEnd += 1 }
                if first {
                    // HTTP/1.1 NNN Reason
                    guard lineEnd - lineStart >= 12 else { throw Failure("a malformed status line") }
                    status = try Self.decimal(bytes, lineStart + 9, lineStart + 12)
                    first = false
                } else if let colon = (lineStart..<lineEnd).first(where: { bytes[$0] == UInt8(ascii: ":") }) {
                    var valueStart = colon + 1
                    while valueStart < lineEnd, bytes[valueStart] == 32 || bytes[valueStart] == 9 { valueStart += 1 }
                    var valueEnd = lineEnd
                    while valueEnd > valueStart, bytes[valueEnd - 1] == 32 || bytes[valueEnd - 1] == 9 { valueEnd -= 1 }
                    if Self.named(bytes, lineStart, colon, "content-length") {
                        length = try Self.decimal(bytes, valueStart, valueEnd)
                    } else if Self.named(bytes, lineStart, colon, "etag") {
                        etag = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[valueStart..<valueEnd]), as: UTF8.self)
                    } else if Self.named(bytes, lineStart, colon, "transfer-encoding") {
                        throw Failure("an answer not framed by Content-Length")
                    }
                }
                lineStart = lineEnd + 2
            }
            let total = headEnd + 4 + length
            guard bytes.count >= total else { return .some(nil) }
            return (LoadAnswer(status: status, etag: etag), total)
        }
        switch parsed {
        case nil:
            scanned = max(0, buffer.readableBytes - 3)
            return nil
        case .some(nil):
            return nil
        case .some(.some(let parsed)):
            buffer.moveReaderIndex(forwardBy: parsed.total)
            scanned = 0
            return parsed.answer
        }
    }

    /// The offset of the `\r\n\r\n` that ends the head.
    private static func endOfHead(_ bytes: UnsafeRawBufferPointer, from offset: Int) -> Int? {
        var index = offset
        while index + 3 < bytes.count {
            if bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 { return index }
            index += 1
        }
        return nil
    }

    private static func decimal(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) throws -> Int {
        guard start < end, end - start <= 18 else { throw Failure("a malformed number") }
        var value = 0
        for index in start..<end {
            let digit = bytes[index] &- 48
            guard digit < 10 else { throw Failure("a malformed number") }
            value = value * 10 + Int(digit)
        }
        return value
    }

    /// Whether the header name in `start..<end` is `lowercased`, in any case.
    private static func named(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int, _ lowercased: StaticString) -> Bool {
        guard end - start == lowercased.utf8CodeUnitCount else { return false }
        let name = lowercased.utf8Start
        for index in 0..<(end - start) {
            let byte = bytes[start + index]
            let lower = byte >= 65 && byte <= 90 ? byte + 32 : byte
            if lower != name[index] { return false }
        }
        return true
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
