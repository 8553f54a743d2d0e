import Configuration

extension ManagedAppStoreSettings {
    /// Reads the `apps_store` section: neither key set means managed apps are off.
    public init(config: ConfigReader) throws {
        self.init()
        key = try config.string(forKey: "key_file").map { try ManagedAppKey(file: $0, source: "apps_store.key_file") }
        previousKey = try config.string(forKey: "previous_key_file").map {
            try ManagedAppKey(file: $0, source: "apps_store.previous_key_file")
        }
        if previousKey != nil && key == nil {
            throw ConfigurationError(
                "apps_store.previous_key_file needs apps_store.key_file (the key that replaces it)"
            )
        }
    }
}
