import ArgumentParser
import AsyncHTTPClient
import Foundation
import Histogram
import NIOCore

/// `push-relay-bench`: load generators that print throughput and latency percentiles.
@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-relay-bench",
        abstract: "Benchmarks for a running PushRelay.",
        subcommands: [Ingest.self]
    )
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

    @Option(help: "Base URL of the relay.")
    var url = "http://127.0.0.1:8080"

    @Option(help: "App id.")
    var app: String

    @Option(help: "The app's webhook secret.")
    var secret: String

    @Option(name: [.short, .customLong("requests")], help: "Webhooks to send.")
    var requests = 20_000

    @Option(name: [.short, .customLong("concurrency")], help: "Requests in flight at once.")
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
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: concurrency)
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(30))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let target = "\(url)/v1/webhooks/zendesk/\(app)/\(secret)"
        do {
            if warmup > 0 {
                _ = try await drive(client: client, target: target, count: warmup, offset: 0, rate: nil)
            }
            let result = try await drive(client: client, target: target, count: requests, offset: warmup, rate: rate)
            report(result)
        } catch {
            try await client.shutdown()
            throw error
        }
        try await client.shutdown()
    }

    struct Result {
        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
        var accepted = 0
        var failed: [String: Int] = [:]
        var elapsed: Double = 0
    }

    private func drive(client: HTTPClient, target: String, count: Int, offset: Int, rate: Double?) async throws -> Result {
        let counter = Counter()
        let start = ContinuousClock.now
        let results = try await withThrowingTaskGroup(of: Result.self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var local = Result()
                    while let index = counter.next(limit: count) {
                        let scheduled = rate.map { start + .nanoseconds(Int64(Double(index) / $0 * 1e9)) } ?? ContinuousClock.now
                        if rate != nil, scheduled > ContinuousClock.now { try await Task.sleep(until: scheduled) }
                        let sent = rate == nil ? ContinuousClock.now : scheduled
                        let outcome = await send(client: client, target: target, number: offset + index)
                        let micros = (ContinuousClock.now - sent).microseconds
                        _ = local.histogram.record(UInt64(max(1, micros)))
                        if outcome == "202" { local.accepted += 1 } else { local.failed[outcome, default: 0] += 1 }
                    }
                    return local
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
        var result = results
        result.elapsed = (ContinuousClock.now - start).seconds
        return result
    }

    private func send(client: HTTPClient, target: String, number: Int) async -> String {
        var request = HTTPClientRequest(url: target)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        let targets = (0..<devices).map { device in
            #"{"identifier":"bench-\#((number * devices + device) % tokenPool)","type":"\#(device % 2 == 0 ? "android" : "ios")"}"#
        }
        let body = #"{"devices":[\#(targets.joined(separator: ","))],"notification":{"title":"Agent replied","body":"Reply \#(number) on your ticket","ticket_id":"\#(number % 5000)"}}"#
        request.body = .bytes(ByteBuffer(string: body))
        do {
            let response = try await client.execute(request, timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 1 << 20)
            return String(response.status.code)
        } catch {
            return "error: \(type(of: error))"
        }
    }

    private func report(_ result: Result) {
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
