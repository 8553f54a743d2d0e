import ArgumentParser
import Foundation
import PushRelay

/// `push-relay reload --pid PID`: the packaged units' `ExecReload=`. Unlike SIGHUP, it waits for
/// the relay's answer and fails when the configuration is refused, so `systemctl reload` fails too.
struct Reload: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Ask a running relay to reload its configuration, and wait for its answer.",
        discussion: """
            Asks the push-relay serve with process ID --pid (systemd's $MAINPID in the units' ExecReload=) over its \
            control socket, as its own user or root, and waits for it to read the configuration again as on SIGHUP. \
            Prints what changed and exits 0 when the configuration was put in use; prints the reason and exits 78 when \
            it was refused (the configuration in use is unchanged); exits 1 when the relay cannot be reached. Check a \
            file before with `push-relay config check`.
            """
    )

    @Option(help: ArgumentHelp("The process ID of the push-relay serve to reload.", valueName: "pid"))
    var pid: Int32

    @Option(help: "Seconds to wait for the answer.")
    var timeout: Int = 120

    func validate() throws {
        guard pid > 0 else { throw ValidationError("--pid must be a process ID, not \(pid)") }
        guard timeout > 0 else { throw ValidationError("--timeout must be at least 1 second") }
    }

    func run() throws {
        let answer: ControlSocket.Answer
        do {
            answer = try ControlSocket.requestReload(pid: pid, timeout: timeout)
        } catch {
            throw CommandError("cannot ask process \(pid) to reload: \(error)")
        }
        guard answer.status == "reloaded", let outcome = answer.outcome else {
            throw CommandError(
                "configuration reload refused, the configuration in use is unchanged: \(answer.reason ?? "no reason given")",
                exitStatus: .configuration
            )
        }
        print(Self.summary(outcome))
    }

    /// `configuration reloaded: apps a, b; added c; restart needed for http.port`.
    static func summary(_ outcome: ConfigurationReloader.Outcome) -> String {
        var parts = ["apps \(outcome.apps.isEmpty ? "none" : outcome.apps.joined(separator: ", "))"]
        for (name, list) in [("added", outcome.added), ("removed", outcome.removed), ("changed", outcome.changed)] where !list.isEmpty {
            parts.append("\(name) \(list.joined(separator: ", "))")
        }
        if !outcome.restartNeeded.isEmpty {
            parts.append("read at the next restart only: \(outcome.restartNeeded.joined(separator: ", "))")
        }
        return "configuration reloaded: " + parts.joined(separator: "; ")
    }
}
