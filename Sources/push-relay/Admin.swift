import ArgumentParser
import CurlHTTP2
import Foundation

/// Where the admin commands find the relay, and with which key.
struct RemoteOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The relay's base URL (or PUSH_RELAY_SERVER; default http://127.0.0.1:8080).", valueName: "url"))
    var server: String?

    @Option(
        help: ArgumentHelp(
            "An admin API key (or PUSH_RELAY_ADMIN_KEY, which keeps it out of the process list). Create one with `push-relay keys create --admin`.",
            valueName: "key"
        )
    )
    var adminKey: String?

    var baseURL: String {
        var url = server ?? ProcessInfo.processInfo.environment["PUSH_RELAY_SERVER"] ?? "http://127.0.0.1:8080"
        while url.hasSuffix("/") { url.removeLast() }
        return url
    }

    func key() throws -> String {
        guard let key = adminKey ?? ProcessInfo.processInfo.environment["PUSH_RELAY_ADMIN_KEY"], !key.isEmpty else {
            throw CommandError("an admin key is needed: --admin-key or PUSH_RELAY_ADMIN_KEY")
        }
        return key
    }

    /// Sends one request and returns the JSON object of a 2xx answer; anything else is an error
    /// carrying the relay's message.
    func call(_ method: String, _ path: String, body: [UInt8] = [], contentType: String? = nil) async throws -> [String: Any] {
        let client = try HTTP2Client(configuration: .init(maxConnectionsPerHost: 1, maxConcurrentStreams: 4))
        defer { Task { await client.shutdown() } }
        var headers: [(name: String, value: String)] = [("authorization", "Bearer \(try key())"), ("accept", "application/json")]
        if let contentType { headers.append(("content-type", contentType)) }
        let response: HTTP2Response
        do {
            response = try await client.send(HTTP2Request(url: baseURL + path, method: method, headers: headers, body: body, timeout: .seconds(600)))
        } catch {
            throw CommandError("cannot reach the relay at \(baseURL): \(error)")
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        guard (200..<300).contains(response.status) else {
            let message = ((object?["error"] as? [String: Any])?["message"] as? String) ?? String(decoding: response.body.prefix(300), as: UTF8.self)
            throw CommandError("the relay answered \(response.status): \(message)")
        }
        return object ?? [:]
    }
}

/// `push-relay devices …`.
struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Device registry operations against a running relay.",
        subcommands: [BulkUnregister.self]
    )
}

/// `push-relay devices bulk-unregister`: uploads a token file and follows the job.
struct BulkUnregister: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bulk-unregister",
        abstract: "Remove many device tokens from an app's registry: upload a file of tokens and follow the job to its end.",
        discussion: """
            The file has one token per line (a .csv file: the first column; a 'token' header is skipped). The relay stores the \
            upload, answers with a job id and works through the tokens in the background; this command shows a progress bar \
            (percentage, rate, ETA) on a terminal and a plain line every two seconds otherwise, then the final counts. \
            Interrupting the command does not stop the job: `push-relay jobs cancel ID` does.
            """
    )

    @Option(help: ArgumentHelp("The app whose devices are removed.", valueName: "id"))
    var app: String

    @Option(help: ArgumentHelp("The token file.", valueName: "path"))
    var file: String

    @Flag(help: "Also send the removed tokens to the app's Zendesk (Bulk Unregister API).")
    var propagateToZendesk = false

    @Flag(help: "Print the job id and return without following the job.")
    var noWait = false

    @OptionGroup var remote: RemoteOptions

    func run() async throws {
        guard let data = FileManager.default.contents(atPath: file) else { throw CommandError("cannot read \(file)") }
        let type = file.lowercased().hasSuffix(".csv") ? "text/csv" : "text/plain"
        let started = ContinuousClock.now
        let created = try await remote.call(
            "POST",
            "/v1/admin/apps/\(app)/devices/bulk-unregister?propagate_to_zendesk=\(propagateToZendesk)",
            body: Array(data),
            contentType: type
        )
        guard let id = created["job_id"] as? String else { throw CommandError("the relay did not return a job id") }
        let uploaded = ContinuousClock.now - started
        print("job \(id): \(created["total"] as? Int ?? 0) tokens uploaded in \(Self.seconds(uploaded))")
        if noWait { return }
        let job = try await JobFollower(remote: remote, id: id, started: started).follow()
        if job["status"] as? String != "succeeded" { throw ExitCode.failure }
    }

    static func seconds(_ duration: Duration) -> String {
        String(format: "%.2f s", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }
}

/// Polls a job and draws its progress until it finishes.
struct JobFollower {
    let remote: RemoteOptions
    let id: String
    let started: ContinuousClock.Instant

    func follow() async throws -> [String: Any] {
        let terminal = isatty(STDOUT_FILENO) != 0
        var lastPlain = ContinuousClock.now - .seconds(10)
        var samples: [(ContinuousClock.Instant, Int)] = []
        while true {
            let job = try await remote.call("GET", "/v1/admin/jobs/\(id)")
            let status = job["status"] as? String ?? "?"
            let total = job["total"] as? Int ?? 0
            let processed = job["processed"] as? Int ?? 0
            let now = ContinuousClock.now
            samples.append((now, processed))
            samples.removeAll { now - $0.0 > .seconds(5) }
            let rate: Double = {
                guard let first = samples.first, first.0 < now else { return 0 }
                let elapsed = now - first.0
                return Double(processed - first.1) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            }()
            let fraction = total > 0 ? Double(processed) / Double(total) : 0
            let eta = rate > 0 ? String(format: "%.0f s", Double(total - processed) / rate) : "–"
            let finished = ["succeeded", "failed", "cancelled"].contains(status)
            if terminal {
                let width = 30
                let filled = Int(fraction * Double(width))
                let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
                print(
                    String(format: "\r[%@] %5.1f%%  %d/%d  %.0f/s  ETA %@  %@   ", bar, fraction * 100, processed, total, rate, eta, status),
                    terminator: ""
                )
                fflush(nil)
            } else if finished || now - lastPlain >= .seconds(2) {
                print(String(format: "job %@: %@ %d/%d (%.1f%%), %.0f tokens/s, ETA %@", id, status, processed, total, fraction * 100, rate, eta))
                fflush(nil)
                lastPlain = now
            }
            if finished {
                if terminal { print("") }
                print(
                    "job \(id) \(status) after \(BulkUnregister.seconds(ContinuousClock.now - started)): total \(total), "
                        + "removed \(job["removed"] as? Int ?? 0), not_found \(job["not_found"] as? Int ?? 0), "
                        + "failed \(job["failed"] as? Int ?? 0), forwarded to Zendesk \(job["forwarded"] as? Int ?? 0)"
                )
                if let error = job["error"] as? String { print("error: \(error)") }
                return job
            }
            try await Task.sleep(for: .milliseconds(terminal ? 200 : 250))
        }
    }
}

/// `push-relay jobs list|show|cancel`.
struct Jobs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, show and cancel background jobs on a running relay.",
        subcommands: [List.self, Show.self, Cancel.self]
    )

    static func line(_ job: [String: Any]) -> String {
        let fields = ["id", "app_id", "status", "total", "processed", "removed", "not_found", "failed", "forwarded", "created_at"]
        return fields.map { "\($0)=\(job[$0].map { "\($0)" } ?? "-")" }.joined(separator: " ")
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Recent jobs, newest first.")
        @Option(help: "Only this app's jobs.") var app: String?
        @Option(help: "How many.") var limit = 20
        @OptionGroup var remote: RemoteOptions

        func run() async throws {
            var path = "/v1/admin/jobs?limit=\(limit)"
            if let app { path += "&app=\(app)" }
            let jobs = try await remote.call("GET", path)["jobs"] as? [[String: Any]] ?? []
            if jobs.isEmpty { print("no jobs") }
            for job in jobs { print(Jobs.line(job)) }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "One job; --follow draws its progress until it ends.")
        @Argument(help: "The job id.") var id: String
        @Flag(help: "Follow the job until it finishes.") var follow = false
        @OptionGroup var remote: RemoteOptions

        func run() async throws {
            if follow {
                _ = try await JobFollower(remote: remote, id: id, started: .now).follow()
            } else {
                let job = try await remote.call("GET", "/v1/admin/jobs/\(id)")
                let data = try JSONSerialization.data(withJSONObject: job, options: [.prettyPrinted, .sortedKeys])
                print(String(decoding: data, as: UTF8.self))
            }
        }
    }

    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cancel a queued or running job.",
            discussion: """
                No new batch starts once the job is cancelled, but the batches already running finish: up to \
                jobs.parallel_batches × jobs.batch_size more tokens (by default 2 × 50,000) may be removed after this returns. \
                `push-relay jobs show ID` a few seconds later has the final counts.
                """
        )
        @Argument(help: "The job id.") var id: String
        @OptionGroup var remote: RemoteOptions

        func run() async throws {
            print(Jobs.line(try await remote.call("POST", "/v1/admin/jobs/\(id)/cancel")))
            print("batches already running finish (up to jobs.parallel_batches × jobs.batch_size tokens); `jobs show \(id)` has the final counts")
        }
    }
}
