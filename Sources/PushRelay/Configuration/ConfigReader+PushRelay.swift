import Configuration
import Foundation

extension ConfigReader {
    /// PushRelay's provider hierarchy: command-line overrides, then environment variables (`HTTP_PORT`
    /// for `http.port`), then the YAML file given by `--config` or `CONFIG_FILE`.
    ///
    /// Strict: a key in the file that no setting reads, a value that is not of its key's type, or an
    /// unknown `PUSH_RELAY_*` variable is an error naming the key (``ConfigurationSchema``).
    /// `recorder`, when given, sees every setting read once with its value and source (for
    /// `push-relay config check`).
    public static func pushRelay(
        overrides: [AbsoluteConfigKey: ConfigValue] = [:],
        configFile: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        recorder: AccessRecorder? = nil
    ) async throws -> ConfigReader {
        try ConfigurationSchema.checkEnvironment(environment)
        let variables = EnvironmentVariablesProvider(
            environmentVariables: environment,
            secretsSpecifier: .dynamic { key, _ in YAMLConfigFile.isSecret(key) }
        )
        var overrides = overrides
        let file = configFile ?? ConfigReader(provider: variables).string(forKey: "config.file")
        if let file, !file.isEmpty {
            // The apps are read from the file this names (``AppConfiguration/load(reader:)``).
            overrides["config.file"] = .init(.string(file), isSecret: false)
        }
        var providers: [any ConfigProvider] = [InMemoryProvider(name: "arguments", values: overrides), variables]
        if let file, !file.isEmpty {
            let values = try YAMLConfigFile.values(path: file)
            try ConfigurationSchema.checkFileKeys(values.keys.map { $0.components.joined(separator: ".") }, file: file)
            providers.append(InMemoryProvider(name: "file", values: ConfigurationSchema.coerced(values)))
        }
        // Checked through a reader of its own, so the one returned records nothing.
        let checking = recorder ?? AccessRecorder()
        try ConfigurationSchema.check(ConfigReader(providers: providers, accessReporter: checking), recorder: checking)
        return ConfigReader(providers: providers)
    }
}
