import ArgumentParser
// Linked for its malloc, as push-relay is (Allocator.swift there): the sender measured here runs
// on the same allocator as the relay's.
import CJemalloc
import CurlHTTP2
import Foundation
import Histogram
import Logging
import PushSandbox

/// Measures the libcurl HTTP/2 sender alone: pushes per second over one TLS connection to the
/// sandbox's `/sink`, which answers 200 without checks. Client and sink share the machine.
struct Sender: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send N APNs-sized requests over one HTTP/2 connection to an in-process TLS sink and print pushes/s."
    )

    @Option(name: [.customShort("n"), .customLong("requests")], help: "Requests to send.")
    var requests = 200_000

    @Option(name: [.customShort("c"), .customLong("concurrency")], help: "Requests in flight (streams on the one connection).")
    var concurrency = 200

    @Option(
        help: ArgumentHelp(
            "An external TLS HTTP/2 sink that answers POSTs with 200 (e.g. nghttpd, see scripts/bench/sender.sh); omit for the in-process "
                + "sandbox sink."
        )
    )
    var url: String?

    @Option(help: "CA file (PEM) that signed the external sink's certificate.")
    var caFile: String?

    @Option(help: "Event threads of the client, each with its own multi handle and connection.")
    var threads = 1

    func run() async throws {
        var logger = Logger(label: "push-relay-bench.sandbox")
        logger.logLevel = .error
        let sink: SandboxServer?
        if url == nil {
            let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-bench-\(UUID().uuidString)")
            sink = try await SandboxServer.start(configuration: .init(directory: directory), logger: logger)
        } else {
            sink = nil
        }
        let client = try HTTP2Client(
            configuration: .init(
                maxConnectionsPerHost: 1,
                maxConcurrentStreams: concurrency,
                caFile: sink?.certificates.caFile ?? caFile,
                eventThreads: threads
            )
        )
        let url = self.url ?? "https://localhost:\(sink!.port)/sink"
        let headers: [(name: String, value: String)] = [("apns-topic", "com.example.app"), ("apns-push-type", "alert"), ("apns-priority", "10")]
        let payload = Array(
            #"{"aps":{"alert":{"title":"Agent replied","body":"Reply on your ticket"},"badge":1,"sound":"default"},"zendesk_sdk_request_id":"5"}"#
                .utf8
        )
        for _ in 0..<threads { _ = try await client.send(HTTP2Request(url: url, headers: headers, body: payload)) }  // connect and warm up
        let counter = Counter()
        let start = ContinuousClock.now
        let (ok, histogram) = try await withThrowingTaskGroup(of: (Int, Histogram<UInt64>).self) { senders in
            for _ in 0..<concurrency {
                senders.addTask {
                    var ok = 0
                    var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
                    while counter.next(limit: requests) != nil {
                        let sent = ContinuousClock.now
                        if try await client.send(HTTP2Request(url: url, headers: headers, body: payload)).status == 200 { ok += 1 }
                        _ = histogram.record(UInt64(max(1, (ContinuousClock.now - sent).microseconds)))
                    }
                    return (ok, histogram)
                }
            }
            var total = 0
            var merged = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
            for try await (ok, histogram) in senders {
                total += ok
                merged.add(histogram)
            }
            return (total, merged)
        }
        let elapsed = (ContinuousClock.now - start).seconds
        await client.shutdown()
        await sink?.shutdown()
        func ms(_ p: Double) -> String { String(format: "%.2f ms", Double(histogram.valueAtPercentile(p)) / 1000) }
        print(
            "sender: \(requests) requests of \(payload.count) bytes over "
                + "\(threads == 1 ? "one TLS HTTP/2 connection" : "\(threads) TLS HTTP/2 connections, one event thread each"), "
                + "\(concurrency) streams in flight, to \(sink == nil ? url : "the in-process sink")"
        )
        print("  client      \(CurlLibrary.version)")
        print(String(format: "  elapsed     %.2f s", elapsed))
        print(String(format: "  throughput  %.0f pushes/s answered 200 (%d of %d)", Double(ok) / elapsed, ok, requests))
        print("  latency     p50 \(ms(50))  p99 \(ms(99))  max \(ms(100))")
        if let sink { print("  sink saw    \(sink.state.sinkRequests - 1) requests") }
    }
}
