import ArgumentParser
import Foundation
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
    /// `Error: <message>` and exits with ``ExitStatus/of(_:)``.
    static func main() async {
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
            let status = ExitStatus.of(error)
            guard status != .failure else { exit(withError: error) }
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            Foundation.exit(status.rawValue)
        }
    }
}
