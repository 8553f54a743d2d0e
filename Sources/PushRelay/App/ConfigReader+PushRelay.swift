import Configuration

extension ConfigReader {
    /// PushRelay's provider hierarchy: command-line overrides, then environment variables (`HTTP_PORT`
    /// for `http.port`), then the YAML file given by `--config` or `CONFIG_FILE`.
    public static func pushRelay(overrides: [AbsoluteConfigKey: ConfigValue] = [:], configFile: String? = nil) async throws -> ConfigReader {
        let environment = EnvironmentVariablesProvider(secretsSpecifier: .dynamic { key, _ in YAMLConfigFile.isSecret(key) })
        var providers: [any ConfigProvider] = [InMemoryProvider(name: "arguments", values: overrides), environment]
        let file = configFile ?? ConfigReader(provider: environment).string(forKey: "config.file")
        if let file, !file.isEmpty {
            providers.append(InMemoryProvider(name: "file", values: try YAMLConfigFile.values(path: file)))
        }
        return ConfigReader(providers: providers)
    }
}
