import ArgumentParser
import Configuration
import Foundation
import Logging
import PushRelay
import Synchronization

/// Options every command that touches the database shares.
struct CommonOptions: ParsableArguments {
    @Option(name: .customLong("config"), help: ArgumentHelp("YAML configuration file (or CONFIG_FILE).", valueName: "file"))
    var configFile: String?

    @Option(
        help: ArgumentHelp(
            "A file of NAME=value lines (systemd's EnvironmentFile format, such as /etc/push-relay/environment) set in the environment first.",
            valueName: "file"
        )
    )
    var envFile: String?

    @Option(
        help: ArgumentHelp("Where the embedded PostgreSQL cluster lives when database.url is unset (default ./.push-relay-data).", valueName: "dir")
    )
    var dataDir: String?

    @Option(help: ArgumentHelp("trace, debug, info, notice, warning, error or critical (or LOG_LEVEL; default info).", valueName: "level"))
    var logLevel: String?

    @Option(help: ArgumentHelp("text or json: one JSON object per line (or LOG_FORMAT; default text).", valueName: "format"))
    var logFormat: String?

    /// Builds the configuration reader with these options on top; refuses unknown keys and values
    /// of the wrong type.
    func reader(_ extra: [AbsoluteConfigKey: ConfigValue] = [:], recorder: AccessRecorder? = nil) async throws -> ConfigReader {
        try applyEnvironmentFile()
        do {
            return try await readConfiguration(extra)(recorder ?? AccessRecorder())
        } catch {
            throw CommandError("configuration: \(error)", exitStatus: .configuration)
        }
    }

    /// Sets the variables of `--env-file` in this process's environment, once: a reload reads the
    /// configuration again but not this file, as systemd reads a unit's `EnvironmentFile=` only
    /// when the unit starts.
    func applyEnvironmentFile() throws {
        guard let envFile, !Self.environmentApplied.exchange(true, ordering: .relaxed) else { return }
        do {
            try EnvironmentFile.apply(path: envFile)
        } catch {
            throw CommandError("configuration: \(error)", exitStatus: .configuration)
        }
    }
    private static let environmentApplied = Atomic<Bool>(false)

    /// Reads the configuration as ``reader(_:recorder:)`` does, each time it is called (a reload
    /// reads the file again, with the same options on top).
    func readConfiguration(_ extra: [AbsoluteConfigKey: ConfigValue] = [:]) -> ConfigurationReloader.ReadConfiguration {
        var overrides = extra
        if let dataDir { overrides["data.directory"] = .init(.string(dataDir), isSecret: false) }
        if let logLevel { overrides["log.level"] = .init(.string(logLevel), isSecret: false) }
        if let logFormat { overrides["log.format"] = .init(.string(logFormat), isSecret: false) }
        if let configFile { overrides["config.file"] = .init(.string(configFile), isSecret: false) }
        let configFile = configFile
        return { [overrides] recorder in
            try await ConfigReader.pushRelay(overrides: overrides, configFile: configFile, recorder: recorder)
        }
    }

    /// `log.level` and `log.format`, refused when they name no level or format.
    static func logSettings(_ reader: ConfigReader) throws -> (Logger.Level, RelayLogHandler.Format) {
        let name = reader.string(forKey: "log.level", default: "info")
        guard let level = Logger.Level(rawValue: name.lowercased()) else {
            throw CommandError("unknown log level '\(name)'; use trace, debug, info, notice, warning, error or critical", exitStatus: .configuration)
        }
        let formatName = reader.string(forKey: "log.format", default: "text")
        guard let format = RelayLogHandler.Format(rawValue: formatName.lowercased()) else {
            throw CommandError("unknown log format '\(formatName)'; use text or json", exitStatus: .configuration)
        }
        return (level, format)
    }

    /// Bootstraps logging once for the process and returns the root logger.
    func logger(_ reader: ConfigReader) throws -> Logger {
        let (level, format) = try Self.logSettings(reader)
        LoggingSystem.bootstrap { label in
            var handler = RelayLogHandler.standardError(label: label, format: format)
            handler.logLevel = level
            return handler
        }
        var logger = Logger(label: "push-relay")
        logger.logLevel = level
        return logger
    }
}

/// A failure while a command runs: printed as `Error: <message>` with its exit status (1 unless
/// said), without the usage text that ArgumentParser adds to a `ValidationError` (which is for
/// wrong arguments, status 64).
struct CommandError: Error, CustomStringConvertible {
    var description: String
    var exitStatus: ExitStatus
    init(_ description: String, exitStatus: ExitStatus = .failure) {
        self.description = description
        self.exitStatus = exitStatus
    }
}
