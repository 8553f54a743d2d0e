import ArgumentParser
import CThreadNice
import Foundation
import Logging
import PushRelay

/// push-relay's exit statuses (docs/operations.md, "Command line"). A supervisor restarts on 1 and
/// not on 78: the packaged units say `RestartPreventExitStatus=78`, so a wrong password or a
/// missing `database.url` stops after one clear line instead of looping.
enum ExitStatus: Int32 {
    /// Something failed that may work on another try (a database not reachable in time, a crash).
    case failure = 1
    /// A wrong option or argument (ArgumentParser's own status for them).
    case usage = 64
    /// The configuration is wrong, or the database refuses it: trying again cannot help (EX_CONFIG).
    case configuration = 78

    /// The status for an error a command ends with.
    static func of(_ error: any Error) -> ExitStatus {
        switch error {
        case let error as CommandError: error.exitStatus
        case is ConfigurationError, is DatabaseRefusal: .configuration
        default: .failure
        }
    }
}

extension PushRelayCommand {
    /// ArgumentParser's main, with PushRelay's exit status for a configuration error: parsing,
    /// help and usage errors are ArgumentParser's (status 0 or 64); a command's own error prints
    /// `Error: <message>` (at the journal's err priority when standard error is the journal) and
    /// exits with ``ExitStatus/of(_:)``.
    static func main() async {
        // Keeps CThreadNice's setpriority in the executable (thread_nice.c says why).
        _ = push_relay_thread_nice_linked()
        var command: any ParsableCommand
        do {
            command = try await asyncParseAsRoot(nil)
        } catch {
            exit(withError: error)
        }
        do {
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let error as ExitCode {
            exit(withError: error)
        } catch {
            // ArgumentParser's own errors (help, a command group run without a subcommand) and
            // other failures are ArgumentParser's to print; PushRelay's are printed here.
            let status = ExitStatus.of(error)
            guard status != .failure || error is CommandError else { exit(withError: error) }
            let prefix = JournalPriority.standardErrorIsJournal ? JournalPriority.prefix(.error) : ""
            FileHandle.standardError.write(Data("\(prefix)Error: \(error)\n".utf8))
            Foundation.exit(status.rawValue)
        }
    }
}
