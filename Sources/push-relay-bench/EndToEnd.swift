import ArgumentParser
import Foundation
import Histogram
import Logging
import Postgres
import PushSandbox
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Webhook in, push out: starts a sandbox gateway in this process and a relay process configured
/// to deliver to it (embedded, durable PostgreSQL), then measures
/// 1. throughput: N webhooks as fast as the relay takes them, until the sandbox has every push;
/// 2. latency: webhooks at a fixed rate, each timed from its scheduled send to its push arriving;
/// and prints the relay's peak RSS (VmHWM).
struct EndToEnd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "e2e",
        abstract: "Webhooks into a relay process, pushes out to an in-process sandbox: notifications/s, webhook-to-push latency, peak RSS.",
        discussion:
            "Each webhook names one device (iOS and Android alternately) and its own ticket, which is how each push is matched to its webhook."
    )

    @Option(help: ArgumentHelp("The push-relay executable (default: beside this one).", valueName: "path"))
    var relay: String?

    @Option(help: "Port for the relay's HTTP server.")
    var port = 18490

    @Option(name: [.customShort("n"), .customLong("requests")], help: "Webhooks in the throughput run.")
    var requests = 50_000

    @Option(name: [.customShort("c"), .customLong("concurrency")], help: "Connections in the throughput run.")
    var concurrency = 64

    @Option(help: "Webhooks per second in the latency run.")
    var rate = 500.0

    @Option(help: "Seconds the latency run lasts.")
    var seconds = 20

    @Option(help: ArgumentHelp("Directory for the relay's data and configuration (default: a new temporary one).", valueName: "dir"))
    var workDirectory: String?

    @Option(
        help: ArgumentHelp(
            "Relay processes sharing one PostgreSQL server that the benchmark starts (durable), on ports --port, --port + 1, ...; the webhook "
                + "connections are spread over them. Without it, one relay with its own embedded PostgreSQL.",
            valueName: "n"
        )
    )
    var instances: Int?

    @Flag(
        help: ArgumentHelp(
            "Also print the rows PostgreSQL wrote per notification in the throughput run, by table (inserted, updated, of them HOT, "
                + "deleted), and its transactions: waits 11 s before and after the run for its statistics to be reported."
        )
    )
    var postgresRows = false

    func validate() throws {
        guard (instances ?? 1) >= 1 else { throw ValidationError("--instances must be at least 1") }
    }

    // Over 100 lines on purpose: the benchmark reads as its script, top to bottom (start the
    // processes, load, measure, report), and those steps share a dozen values a split would pass
    // around; each step is marked by a comment.
    func run() async throws {
        let relayPath = relay ?? ((CommandLine.arguments[0] as NSString).deletingLastPathComponent as NSString).appendingPathComponent("push-relay")
        guard FileManager.default.isExecutableFile(atPath: relayPath) else { throw ValidationError("no push-relay executable at \(relayPath)") }
        let work = workDirectory ?? (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-e2e-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)

        let tracker = PushTracker(capacity: 2_000 + requests + Int(rate * Double(seconds)) + 10)
        var logger = Logger(label: "push-relay-bench.sandbox")
        logger.logLevel = .error
        let credentials = try SandboxCredentials.generate(directory: work + "/credentials")
        let sandbox = try await SandboxServer.start(
            configuration: .init(directory: work + "/sandbox", apnsKeys: credentials.apnsKeys),
            state: SandboxState(recording: false) { tracker.received($0) },
            logger: logger
        )
        let gateway = "https://localhost:\(sandbox.port)"
        let secret = "bench-secret-" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        // Several instances share a server the benchmark starts; one instance alone runs its own.
        var shared: EmbeddedPostgres?
        var databaseSection = ""
        if instances != nil {
            let server = EmbeddedPostgres(configuration: .init(directory: work + "/postgres", durable: true), logger: logger)
            let (conninfo, _) = try await server.start()
            shared = server
            databaseSection = "database:\n  url: \"\(conninfo)\"\n"
        }
        // On an early exit, stop the server without waiting (the normal path stops it cleanly).
        defer { shared?.signalImmediateShutdown() }
        try """
        \(databaseSection)http:
          port: \(port)
        log:
          level: warning
        tls:
          ca_file: \(sandbox.certificates.caFile)
        apps:
          - id: bench
            webhook_secrets: ["\(secret)"]
            apns:
              topic: com.example.bench
              url: \(gateway)
              token: { key_file: \(credentials.apnsKeyFile), key_id: \(SandboxCredentials.apnsKeyID), team_id: \(SandboxCredentials.apnsTeamID) }
            fcm:
              service_account_file: \(try credentials.writeServiceAccount(sandboxURL: gateway))
              url: \(gateway)
        """.write(toFile: work + "/config.yaml", atomically: true, encoding: .utf8)

        let ports = (0..<(instances ?? 1)).map { port + $0 }
        var processes: [Process] = []
        defer {
            for process in processes where process.isRunning {
                process.interrupt()
                process.waitUntilExit()
            }
        }
        for (index, port) in ports.enumerated() {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: relayPath)
            process.arguments = ["serve", "--config", work + "/config.yaml", "--data-dir", work + "/data", "--port", "\(port)"]
            _ = FileManager.default.createFile(atPath: work + "/relay-\(index).log", contents: nil)
            let log = try FileHandle(forWritingTo: URL(fileURLWithPath: work + "/relay-\(index).log"))
            process.standardOutput = log
            process.standardError = log
            try process.run()
            processes.append(process)
            try await waitUntilReady(port: port)
        }
        let relayPIDs = processes.map { Int($0.processIdentifier) }
        let postmasterFile = shared.map { $0.dataDirectory + "/postmaster.pid" } ?? Self.find("postmaster.pid", under: work + "/data")
        // The relay's own cluster keeps its data directory in `pgdata` under the cluster's directory.
        let cluster =
            shared
            ?? postmasterFile.map {
                EmbeddedPostgres(
                    configuration: .init(directory: (($0 as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent),
                    logger: logger
                )
            }
        let conninfo = try? cluster?.conninfo(database: EmbeddedPostgres.databaseName)

        let load = WebhookLoad(
            target: .init(host: "127.0.0.1", port: ports[0], path: "/v1/webhooks/zendesk/bench/\(secret)", morePorts: Array(ports.dropFirst())),
            concurrency: concurrency,
            body: Self.webhook(number:),
            onSend: { number, instant in tracker.sent(number, at: instant) }
        )
        // Warm-up: connections, OAuth token, provider JWT, prepared statements.
        let warmup = 2_000
        _ = try await load.drive(count: warmup, offset: 0, rate: nil)
        guard await tracker.waitForPushes(warmup, timeout: .seconds(60)) else { throw ValidationError("warm-up pushes did not all arrive") }

        // 1. Throughput.
        tracker.reset()
        // PostgreSQL's processes as they are at each reading (a backend may start meanwhile).
        func postgresProcesses() -> [Int] { postmasterFile.map { Self.postgresPIDs(postmasterFile: $0) } ?? [] }
        // Backends report their statistics at most every second while busy and 10 s after going idle.
        if postgresRows { try await Task.sleep(for: .seconds(11)) }
        let workBefore = await PostgresWork.read(conninfo: conninfo)
        let relayBefore = Self.usage(of: relayPIDs)
        let postgresBefore = Self.usage(of: postgresProcesses())
        let bucketsBefore = await Self.latencyBuckets(ports: ports)
        let start = ContinuousClock.now
        // The backlog once a second: deliveries the relays committed and have not finished, from
        // their own counters (queued minus final outcomes), summed over the instances.
        let sampler = Task { () -> [Double] in
            var series: [Double] = []
            while !Task.isCancelled {
                var backlog = 0.0
                for port in ports { backlog += await Self.backlog(port: port) ?? 0 }
                series.append(backlog)
                try? await Task.sleep(for: .seconds(1))
            }
            return series
        }
        let ingest = try await load.drive(count: requests, offset: warmup, rate: nil)
        let arrived = await tracker.waitForPushes(ingest.accepted, timeout: .seconds(300))
        sampler.cancel()
        let backlog = await sampler.value
        let elapsed = (tracker.lastArrival ?? ContinuousClock.now) - start
        let (relayAfter, postgresAfter) = (Self.usage(of: relayPIDs), Self.usage(of: postgresProcesses()))
        let relayCPU = relayAfter.cpu - relayBefore.cpu
        let postgresCPU = postgresAfter.cpu - postgresBefore.cpu
        let relaySwitches = relayAfter.switches - relayBefore.switches
        let postgresSwitches = postgresAfter.switches - postgresBefore.switches
        if postgresRows { try await Task.sleep(for: .seconds(11)) }
        let written = await PostgresWork.read(conninfo: conninfo).flatMap { after in workBefore.map { after.minus($0) } }
        if let instances {
            print(
                "end-to-end: \(instances) relay process\(instances == 1 ? "" : "es") (\(relayPath)) on one PostgreSQL server started by the "
                    + "benchmark (fsync, synchronous_commit on), sandbox over TLS HTTP/2 in the load generator"
            )
        } else {
            print("end-to-end: relay \(relayPath), embedded PostgreSQL (fsync, synchronous_commit on), sandbox over TLS HTTP/2 in the load generator")
        }
        print("throughput run: \(requests) webhooks of one device each, \(concurrency) connections, closed loop")
        print(String(format: "  webhooks accepted  %d in %.2f s (%.0f/s)", ingest.accepted, ingest.elapsed, Double(ingest.accepted) / ingest.elapsed))
        print(
            String(
                format: "  pushes received    %d in %.2f s from the first webhook: %.0f notifications/s end to end%@",
                tracker.count,
                elapsed.seconds,
                Double(tracker.count) / elapsed.seconds,
                arrived ? "" : " (INCOMPLETE)"
            )
        )
        print("  webhook→push       \(tracker.summary())")
        print("  backlog each second (committed, not yet finished): " + backlog.map { String(Int($0)) }.joined(separator: " "))
        let run = Self.subtract(await Self.latencyBuckets(ports: ports), bucketsBefore)
        let (commitP50, commitP99) = (Self.bound(run, at: 0.50), Self.bound(run, at: 0.99))
        print(
            "  commit→outcome     p50 ≤ \(Self.seconds(commitP50))  p99 ≤ \(Self.seconds(commitP99))  (the relays' "
                + "push_relay_delivery_latency_seconds buckets)"
        )
        let notifications = Double(max(tracker.count, 1))
        var figures: [(String, Double)] = [
            ("notifications_per_s", Double(tracker.count) / elapsed.seconds), ("relay_cpu_us", relayCPU / notifications * 1e6),
            ("postgres_cpu_us", postgresCPU / notifications * 1e6), ("throughput_push_p99_ms", tracker.milliseconds(at: 99)),
            ("peak_backlog", backlog.max() ?? 0), ("commit_to_outcome_p99_ms_at_most", commitP99 * 1000),
            ("relay_switches", relaySwitches / notifications), ("postgres_switches", postgresSwitches / notifications),
        ]
        if let written {
            figures.append(("postgres_wal_bytes", written.walBytes / notifications))
            print(String(format: "  WAL per notification  %.0f bytes (PostgreSQL's WAL position)", written.walBytes / notifications))
        }
        if postgresRows, let written {
            print(String(format: "  transactions per notification  %.2f", written.commits / notifications))
            print("  rows per notification" + String(repeating: " ", count: 11) + "inserted updated     HOT deleted")
            for (table, rows) in written.tables.sorted(by: { $0.key < $1.key }) where rows.contains(where: { $0 > 0 }) {
                print(
                    "    \(table.padding(toLength: 30, withPad: " ", startingAt: 0))"
                        + rows.map { String(format: " %7.2f", $0 / notifications) }.joined()
                )
            }
        }
        print(
            String(
                format: "  CPU per notification  relay %.0f µs (all processes), PostgreSQL %.0f µs%@",
                relayCPU / notifications * 1e6,
                postgresCPU / notifications * 1e6,
                postmasterFile == nil ? " (PostgreSQL's processes not found)" : ""
            )
        )
        print(
            String(
                format: "  context switches per notification  relay %.2f (its threads now), PostgreSQL %.2f (its processes now)",
                relaySwitches / notifications,
                postgresSwitches / notifications
            )
        )
        if ports.count > 1 {
            var shares: [String] = []
            for port in ports { shares.append(await Self.delivered(port: port).map { String(Int($0)) } ?? "?") }
            print("  delivered per instance  " + shares.joined(separator: " / ") + " (warm-up included)")
        }

        // 2. Latency at a fixed rate.
        tracker.reset()
        let offset = warmup + requests
        let count = Int(rate * Double(seconds))
        let paced = try await load.drive(count: count, offset: offset, rate: rate)
        let complete = await tracker.waitForPushes(paced.accepted, timeout: .seconds(60))
        print(String(format: "latency run: %d webhooks at %.0f/s (open loop)%@", count, rate, complete ? "" : " (INCOMPLETE)"))
        print("  webhook→push       \(tracker.summary())")
        print("  accept latency     p50 \(Self.ms(paced.histogram, 50))  p99 \(Self.ms(paced.histogram, 99))")
        print("  relay peak RSS     \(processes.map { Self.peakRSS(pid: $0.processIdentifier) }.joined(separator: ", "))")
        figures += [
            ("paced_push_p99_ms", tracker.milliseconds(at: 99)), ("paced_accept_p99_ms", Double(paced.histogram.valueAtPercentile(99)) / 1000),
            ("peak_rss_mb", processes.map { Self.peakRSSMegabytes(pid: $0.processIdentifier) ?? 0 }.max() ?? 0),
        ]
        // One line for machines (push-relay-bench ab reads it).
        print("figures: " + figures.map { "\($0.0)=" + String(format: "%.3f", $0.1) }.joined(separator: " "))
        for process in processes {
            process.interrupt()
            process.waitUntilExit()
        }
        if let shared { try? await shared.stop() }
        await sandbox.shutdown()
        if workDirectory == nil { try? FileManager.default.removeItem(atPath: work) }
    }

    /// PostgreSQL's counters of written work: its WAL position, the database's committed
    /// transactions and, by table, rows inserted, updated, updated HOT (no index entry written) and
    /// deleted. The statistics lag the work by up to a second while backends are busy.
    struct PostgresWork {
        var walBytes: Double
        var commits: Double
        var tables: [String: [Double]]

        /// `nil` when there is no connection string or the reading fails.
        static func read(conninfo: String?) async -> PostgresWork? {
            guard let conninfo else { return nil }
            var logger = Logger(label: "push-relay-bench.postgres")
            logger.logLevel = .error
            let client = PostgresClient(configuration: .init(conninfo: conninfo, maxConnections: 1), logger: logger)
            let row = try? await client.query(
                """
                SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8,
                    (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())::float8,
                    coalesce((SELECT json_object_agg(relname, json_build_array(n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del))
                        FROM pg_stat_user_tables), '{}')::text
                """
            ).first
            await client.close()
            guard let row, let wal = try? row.decode(Double.self, at: 0), let commits = try? row.decode(Double.self, at: 1),
                let json = try? row.decode(String.self, at: 2),
                let tables = try? JSONDecoder().decode([String: [Double]].self, from: Data(json.utf8))
            else { return nil }
            return PostgresWork(walBytes: wal, commits: commits, tables: tables)
        }

        func minus(_ earlier: PostgresWork) -> PostgresWork {
            var tables = tables
            for (table, rows) in earlier.tables { tables[table] = zip(tables[table] ?? rows.map { _ in 0 }, rows).map { $0 - $1 } }
            return PostgresWork(walBytes: walBytes - earlier.walBytes, commits: commits - earlier.commits, tables: tables)
        }
    }

    /// The first file named `name` under `directory`.
    static func find(_ name: String, under directory: String) -> String? {
        guard let files = FileManager.default.enumerator(atPath: directory) else { return nil }
        for case let file as String in files where (file as NSString).lastPathComponent == name { return directory + "/" + file }
        return nil
    }

    /// User + system CPU seconds and context switches, summed over processes `pids`.
    static func usage(of pids: [Int]) -> (cpu: Double, switches: Double) {
        (pids.compactMap(Poll.cpuSeconds).reduce(0, +), pids.map(contextSwitches).reduce(0, +))
    }

    /// A PostgreSQL server's postmaster (from `postmaster.pid`) and every process whose parent it
    /// is (backends, WAL writer, checkpointer, ...).
    static func postgresPIDs(postmasterFile: String) -> [Int] {
        guard let text = try? String(contentsOfFile: postmasterFile, encoding: .utf8), let first = text.split(separator: "\n").first,
            let postmaster = Int(first)
        else { return [] }
        var pids = [postmaster]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int(entry), let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // After the command: state, then the parent's pid.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, Int(fields[1]) == postmaster { pids.append(pid) }
        }
        return pids
    }

    /// Context switches (voluntary and involuntary) of the threads process `pid` has now, from
    /// /proc: a thread that has ended is no longer counted.
    static func contextSwitches(pid: Int) -> Double {
        var total = 0.0
        for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8) else { continue }
            for line in status.split(separator: "\n")
            where line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                total += line.split(separator: "\t").last.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) } ?? 0
            }
        }
        return total
    }

    /// Deliveries an instance counted as delivered, from its `/metrics`.
    /// `push_relay_deliveries_queued_total` less the final outcomes (delivered, failed, dead_token,
    /// unsendable, expired, skipped) of one relay: what it committed and has not finished.
    static func backlog(port: Int) async -> Double? {
        guard let text = await metrics(port: port) else { return nil }
        let final = ["delivered", "failed", "dead_token", "unsendable", "expired", "skipped"]
        var queued = 0.0
        var finished = 0.0
        for line in text.split(separator: "\n") {
            guard let value = line.split(separator: " ").last.flatMap({ Double($0) }) else { continue }
            if line.hasPrefix("push_relay_deliveries_queued_total{") {
                queued += value
            } else if line.hasPrefix("push_relay_push_outcomes_total{"), final.contains(where: { line.contains("outcome=\"\($0)\"") }) {
                finished += value
            }
        }
        return queued - finished
    }

    /// The cumulative buckets of `push_relay_delivery_latency_seconds`, summed over the relays:
    /// upper bound in seconds → count.
    static func latencyBuckets(ports: [Int]) async -> [Double: Double] {
        var buckets: [Double: Double] = [:]
        for port in ports {
            guard let text = await metrics(port: port) else { continue }
            for line in text.split(separator: "\n") where line.hasPrefix("push_relay_delivery_latency_seconds_bucket{") {
                guard let le = line.split(separator: "le=\"").last?.split(separator: "\"").first,
                    let value = line.split(separator: " ").last.flatMap({ Double($0) })
                else { continue }
                buckets[le == "+Inf" ? .infinity : Double(le) ?? .infinity, default: 0] += value
            }
        }
        return buckets
    }

    static func subtract(_ after: [Double: Double], _ before: [Double: Double]) -> [Double: Double] {
        after.reduce(into: [:]) { result, entry in result[entry.key] = entry.value - (before[entry.key] ?? 0) }
    }

    /// The smallest bucket bound that holds `fraction` of the observations.
    static func bound(_ buckets: [Double: Double], at fraction: Double) -> Double {
        let total = buckets[.infinity] ?? buckets.values.max() ?? 0
        guard total > 0 else { return .nan }
        return buckets.keys.sorted().first { buckets[$0]! >= fraction * total } ?? .infinity
    }

    static func seconds(_ value: Double) -> String {
        value.isFinite ? (value < 1 ? "\(Int((value * 1000).rounded())) ms" : "\(value) s") : "unknown"
    }

    /// A relay's `/metrics` text, or `nil` when it does not answer.
    static func metrics(port: Int) async -> String? {
        guard let (data, _) = try? await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/metrics")!) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    static func delivered(port: Int) async -> Double? {
        guard let text = await metrics(port: port) else { return nil }
        return text.split(separator: "\n")
            .filter { $0.hasPrefix("push_relay_push_outcomes_total{") && $0.contains("outcome=\"delivered\"") }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
    }

    private func waitUntilReady(port: Int) async throws {
        for _ in 0..<240 {
            if let (_, response) = try? await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/ready")!),
                (response as? HTTPURLResponse)?.statusCode == 200
            {
                return
            }
            try await Task.sleep(for: .milliseconds(250))
        }
        throw ValidationError("the relay did not become ready on port \(port)")
    }

    /// Webhook n: one device, alternately iOS (an APNs-shaped hex token) and Android, on ticket n.
    static func webhook(number: Int) -> String {
        let device =
            number % 2 == 0
            ? #"{"identifier":"\#(String(format: "%064x", number))","type":"ios"}"#
            : #"{"identifier":"bench-android-\#(number)","type":"android"}"#
        return #"{"devices":[\#(device)],"notification":{"title":"Agent replied","body":"Reply \#(number) on your ticket","ticket_id":"\#(number)"}}"#
    }

    static func ms(_ histogram: Histogram<UInt64>, _ percentile: Double) -> String {
        String(format: "%.2f ms", Double(histogram.valueAtPercentile(percentile)) / 1000)
    }

    /// VmHWM in megabytes, read from /proc before the process exits.
    static func peakRSSMegabytes(pid: Int32) -> Double? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
        else { return nil }
        return kilobytes / 1024
    }

    /// VmHWM of the relay: its peak resident set, read from /proc before it exits.
    static func peakRSS(pid: Int32) -> String {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return "unknown" }
        let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        return String(format: "%.1f MB", kilobytes / 1024)
    }
}

/// Send instants by webhook number, and the latency of each push that arrives for one.
final class PushTracker: Sendable {
    private struct State {
        var sent: [ContinuousClock.Instant?]
        var histogram = Histogram<UInt64>(highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: .three)
        var count = 0
        var last: ContinuousClock.Instant?
    }

    private let state: Mutex<State>

    init(capacity: Int) { state = Mutex(State(sent: Array(repeating: nil, count: capacity))) }

    func sent(_ number: Int, at instant: ContinuousClock.Instant) {
        state.withLock { if number < $0.sent.count { $0.sent[number] = instant } }
    }

    /// A push arrived at the sandbox: its ticket id is the webhook number.
    func received(_ request: SandboxRequest) {
        guard request.service == "apns" || request.service == "fcm", request.status == 200, let number = Self.ticket(in: request.body) else { return }
        let now = ContinuousClock.now
        state.withLock { state in
            guard number < state.sent.count, let sent = state.sent[number] else { return }
            _ = state.histogram.record(UInt64(max(1, (now - sent).microseconds)))
            state.count += 1
            state.last = now
        }
    }

    func reset() {
        state.withLock { state in
            state.histogram.reset()
            state.count = 0
            state.last = nil
        }
    }

    var count: Int { state.withLock { $0.count } }
    var lastArrival: ContinuousClock.Instant? { state.withLock { $0.last } }

    func waitForPushes(_ expected: Int, timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while count < expected {
            if ContinuousClock.now > deadline { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// The webhook→push latency at `percentile`, in milliseconds.
    func milliseconds(at percentile: Double) -> Double {
        state.withLock { Double($0.histogram.valueAtPercentile(percentile)) / 1000 }
    }

    func summary() -> String {
        state.withLock { state in
            let h = state.histogram
            func ms(_ p: Double) -> String { String(format: "%.2f ms", Double(h.valueAtPercentile(p)) / 1000) }
            return "p50 \(ms(50))  p90 \(ms(90))  p99 \(ms(99))  max \(String(format: "%.2f ms", Double(h.max) / 1000))  (\(state.count) pushes)"
        }
    }

    /// The value of `"zendesk_sdk_request_id":"…"` in a push body.
    static func ticket(in body: String) -> Int? {
        // A byte search: Foundation's range(of:) bridges to CFString and cost the sandbox process
        // a visible share of its CPU at thousands of pushes a second.
        let key = Array(#""zendesk_sdk_request_id":""#.utf8)
        var body = body
        return body.withUTF8 { bytes -> Int? in
            guard bytes.count >= key.count else { return nil }
            var start = 0
            while start + key.count <= bytes.count {
                if bytes[start] == key[0], zip(bytes[start..<start + key.count], key).allSatisfy({ $0 == $1 }) {
                    var index = start + key.count
                    var number = 0
                    var digits = 0
                    while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39, digits < 18 {
                        number = number * 10 + Int(bytes[index] - 0x30)
                        index += 1
                        digits += 1
                    }
                    return digits > 0 ? number : nil
                }
                start += 1
            }
            return nil
        }
    }
}
