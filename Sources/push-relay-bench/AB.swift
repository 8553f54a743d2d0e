import ArgumentParser
import Foundation

/// Two relay binaries measured in one invocation, interleaved: `e2e` with binary A, then B, in odd
/// rounds and B then A in even ones, so a drift of the machine's speed within a round favours
/// neither. Each figure is printed per run, then per binary as min / median / max, with B/A per
/// round (each round's pair ran minutes apart at most) and the median of those ratios.
struct AB: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ab",
        abstract: "A/B two push-relay binaries with interleaved e2e runs: per-run figures, min/median/max per binary, B/A per round.",
        discussion: """
            Arguments after -- go to every e2e run, e.g.
              push-relay-bench ab --a .build-base/release/push-relay --b .build/release/push-relay --rounds 3 -- -n 30000 -c 512
            Figures: notifications/s end to end, relay and PostgreSQL CPU time per notification (from /proc), the \
            webhook→push p99 of the throughput and paced runs, the paced run's accept p99 and the relay's peak RSS. \
            Quote the ratios, not figures from runs of different hours: this machine's speed drifts.
            """
    )

    @Option(help: ArgumentHelp("The A push-relay executable (the baseline).", valueName: "path"))
    var a: String

    @Option(help: ArgumentHelp("The B push-relay executable (the change).", valueName: "path"))
    var b: String

    @Option(help: "Rounds; each runs A and B once.")
    var rounds = 3

    @Argument(parsing: .postTerminator, help: "Options for every e2e run (after --).")
    var e2eArguments: [String] = []

    func validate() throws {
        guard rounds >= 1 else { throw ValidationError("--rounds must be at least 1") }
        for path in [a, b] where !FileManager.default.isExecutableFile(atPath: path) {
            throw ValidationError("no executable at \(path)")
        }
    }

    func run() async throws {
        let bench = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let binaries = ["A": Self.absolute(a), "B": Self.absolute(b)]
        print(
            "A/B: A = \(binaries["A"]!), B = \(binaries["B"]!); \(rounds) round\(rounds == 1 ? "" : "s"), e2e \(e2eArguments.joined(separator: " "))"
        )
        print("machine: \(ProcessInfo.processInfo.activeProcessorCount) cores, \(Self.cpuModel()), \(Date().formatted(.iso8601))")
        var runs: [String: [[String: Double]]] = ["A": [], "B": []]
        var names: [String] = []
        for round in 1...rounds {
            for side in round % 2 == 1 ? ["A", "B"] : ["B", "A"] {
                let (figures, order) = try Self.e2e(bench: bench, relay: binaries[side]!, arguments: e2eArguments)
                if names.isEmpty { names = order }
                runs[side]!.append(figures)
                print("round \(round) \(side): " + order.map { "\($0) \(Self.format(figures[$0]))" }.joined(separator: "  "))
                fflush(nil)
            }
        }
        print("")
        // Wide enough for the longest figure's name (padding(toLength:) cuts a longer one).
        let nameWidth = max(26, (names.map(\.count).max() ?? 0) + 2)
        print(
            "figure".padding(toLength: nameWidth, withPad: " ", startingAt: 0)
                + "A min / median / max".padding(toLength: 30, withPad: " ", startingAt: 0)
                + "B min / median / max".padding(toLength: 30, withPad: " ", startingAt: 0) + "B/A per round (median)"
        )
        for name in names {
            let a = runs["A"]!.compactMap { $0[name] }
            let b = runs["B"]!.compactMap { $0[name] }
            let ratios = zip(a, b).map { $0.0 == 0 ? Double.nan : $0.1 / $0.0 }
            print(
                name.padding(toLength: nameWidth, withPad: " ", startingAt: 0) + Self.spread(a).padding(toLength: 30, withPad: " ", startingAt: 0)
                    + Self.spread(b).padding(toLength: 30, withPad: " ", startingAt: 0)
                    + ratios.map { String(format: "%.2f", $0) }.joined(separator: " ") + String(format: " (%.2f)", Self.median(ratios))
            )
        }
    }

    /// Runs `bench e2e --relay relay arguments…` and reads its `figures:` line.
    static func e2e(bench: String, relay: String, arguments: [String]) throws -> (figures: [String: Double], order: [String]) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: bench)
        process.arguments = ["e2e", "--relay", relay] + arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0, let line = text.split(separator: "\n").last(where: { $0.hasPrefix("figures: ") }) else {
            throw ValidationError("e2e with \(relay) failed (status \(process.terminationStatus)):\n\(text)")
        }
        var figures: [String: Double] = [:]
        var order: [String] = []
        for pair in line.dropFirst("figures: ".count).split(separator: " ") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, let value = Double(parts[1]) else { continue }
            figures[String(parts[0])] = value
            order.append(String(parts[0]))
        }
        return (figures, order)
    }

    static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    static func spread(_ values: [Double]) -> String {
        guard let low = values.min(), let high = values.max() else { return "-" }
        return "\(format(low)) / \(format(median(values))) / \(format(high))"
    }

    static func format(_ value: Double?) -> String {
        guard let value else { return "-" }
        return value >= 100 ? String(format: "%.0f", value) : String(format: "%.2f", value)
    }

    static func cpuModel() -> String {
        let info = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        return info.split(separator: "\n").first { $0.hasPrefix("model name") }.map {
            String($0.split(separator: ":").last ?? "").trimmingCharacters(in: .whitespaces)
        } ?? "unknown CPU"
    }
}
