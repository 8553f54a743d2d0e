import Configuration
import Foundation
import Synchronization

/// Every configuration key PushRelay knows, and the checks that refuse the others.
///
/// The keys are not listed by hand: ``readAll(_:)`` reads every setting the way `serve` does, and
/// the keys it asks for are the known ones. A key in the file that no setting reads, a value of the
/// wrong type, or an unknown `PUSH_RELAY_*` environment variable is an error naming the key and the
/// nearest known one.
public enum ConfigurationSchema {
    /// Keys read outside the settings types: by the command line and by the database's opening.
    static let commandKeys = ["config.file", "data.directory", "log.level", "log.format"]

    /// Environment variables with PushRelay's prefix that the commands read.
    public static let knownEnvironmentVariables: Set<String> = [
        "PUSH_RELAY_SERVER", "PUSH_RELAY_ADMIN_KEY", "PUSH_RELAY_SYSTEM_CURL",
    ]

    /// Reads every setting from `reader`, as `serve` does; throws what a setting refuses (an
    /// invalid `http.trusted_proxies` entry).
    static func readAll(_ reader: ConfigReader) throws {
        _ = HTTPSettings(config: reader.scoped(to: "http"))
        _ = ConnectionLimits(config: reader.scoped(to: "http"))
        _ = try TrustedProxies(config: reader.scoped(to: "http"))
        _ = DatabaseSettings(config: reader.scoped(to: "database"))
        _ = reader.int(forKey: "database.start_wait_seconds", default: 60)
        _ = WebhookSettings(config: reader.scoped(to: "webhooks"))
        _ = DeliverySettings(config: reader.scoped(to: "delivery"), tls: reader.scoped(to: "tls"))
        _ = ZendeskForwarderSettings(config: reader.scoped(to: "zendesk"))
        _ = JobSettings(config: reader.scoped(to: "jobs"))
        _ = UnreadSettings(config: reader.scoped(to: "unread"))
        _ = DeviceSettings(config: reader.scoped(to: "devices"))
        _ = EventForwarderSettings(config: reader.scoped(to: "events"))
        _ = RetentionSettings(config: reader.scoped(to: "retention"))
        _ = ConsoleSettings(config: reader.scoped(to: "console"))
        _ = AuthSettings(config: reader.scoped(to: "auth"))
        _ = try ManagedAppStoreSettings(config: reader.scoped(to: "apps_store"))
        _ = reader.string(forKey: "data.directory", default: DatabaseSettings.defaultDataDirectory)
        _ = reader.string(forKey: "config.file")
        _ = reader.string(forKey: "log.level", default: "info")
        _ = reader.string(forKey: "log.format", default: "text")
    }

    /// Every key a configuration file may set outside `apps:`, sorted.
    public static var knownKeys: [String] { knownTypes.keys.sorted() }

    /// The type each known key is read as.
    static let knownTypes: [String: ConfigType] = {
        let recorder = AccessRecorder()
        try? readAll(ConfigReader(provider: InMemoryProvider(values: [:]), accessReporter: recorder))
        return Dictionary(recorder.events.map { ($0.key, $0.type) }) { first, _ in first }
    }()

    /// A file's values in the types their keys are read as, where the YAML form is a close one: an
    /// integer where a number is read (`acquire_timeout_seconds: 10`), a number or `true` where a
    /// string is. Other mismatches stay, and the checks refuse them.
    static func coerced(_ values: [AbsoluteConfigKey: ConfigValue]) -> [AbsoluteConfigKey: ConfigValue] {
        values.reduce(into: [:]) { result, entry in
            var value = entry.value
            switch (knownTypes[entry.key.components.joined(separator: ".")], value.content) {
            case (.double, .int(let int)): value = ConfigValue(.double(Double(int)), isSecret: value.isSecret)
            case (.string, .int(let int)): value = ConfigValue(.string(String(int)), isSecret: value.isSecret)
            case (.string, .double(let double)): value = ConfigValue(.string(String(double)), isSecret: value.isSecret)
            case (.string, .bool(let bool)): value = ConfigValue(.string(String(bool)), isSecret: value.isSecret)
            case (.doubleArray, .intArray(let ints)):
                value = ConfigValue(.doubleArray(ints.map(Double.init)), isSecret: value.isSecret)
            default: break
            }
            result[entry.key] = value
        }
    }

    /// Refuses keys of a configuration file that no setting reads.
    static func checkFileKeys(_ keys: some Sequence<String>, file: String) throws {
        let known = Set(knownKeys)
        for key in keys.sorted() where !known.contains(key) {
            let place = YAMLConfigFile.position(of: key.split(separator: ".").map(String.init), inFile: file).map {
                " (line \($0.line), column \($0.column))"
            }
            throw ConfigurationError(
                "\(file): unknown key '\(key)'\(place ?? "")\(nearestNameSuggestion(for: key, among: knownKeys + ["apps"]))"
            )
        }
    }

    /// Refuses `PUSH_RELAY_*` variables that nothing reads (a misspelt admin key variable would
    /// otherwise be ignored), except those Kubernetes sets in every pod for a Service named
    /// `push-relay` (``isServiceLink(_:)``).
    static func checkEnvironment(_ environment: [String: String]) throws {
        for name in environment.keys.sorted()
        where name.hasPrefix("PUSH_RELAY_") && !knownEnvironmentVariables.contains(name) && !isServiceLink(name) {
            throw ConfigurationError(
                "unknown environment variable \(name)\(nearestNameSuggestion(for: name, among: knownEnvironmentVariables.sorted()))"
            )
        }
    }

    /// Kubernetes' service-link variables for a Service named `push-relay`:
    /// `PUSH_RELAY_SERVICE_HOST`, `PUSH_RELAY_SERVICE_PORT[_NAME]`, `PUSH_RELAY_PORT` and
    /// `PUSH_RELAY_PORT_<port>_<protocol>[_PROTO|_PORT|_ADDR]`.
    static func isServiceLink(_ name: String) -> Bool {
        if name == "PUSH_RELAY_SERVICE_HOST" || name == "PUSH_RELAY_SERVICE_PORT" || name == "PUSH_RELAY_PORT" {
            return true
        }
        if name.hasPrefix("PUSH_RELAY_SERVICE_PORT_") { return true }
        let parts = name.dropFirst("PUSH_RELAY_PORT_".count).split(separator: "_")
        return name.hasPrefix("PUSH_RELAY_PORT_") && (2...3).contains(parts.count) && Int(parts[0]) != nil
            && ["TCP", "UDP", "SCTP"].contains(parts[1])
            && (parts.count == 2 || ["PROTO", "PORT", "ADDR"].contains(parts[2]))
    }

    /// Reads every setting from `reader` and refuses values that do not convert to their key's type
    /// (`http.port: eighty`), which the reader would otherwise replace by the default.
    public static func check(_ reader: ConfigReader, recorder: AccessRecorder) throws {
        try readAll(reader)
        if let problem = recorder.events.first(where: { $0.conversionError != nil }) {
            throw ConfigurationError("\(problem.key) (from the \(problem.source)) must be \(problem.typeName)")
        }
    }
}

/// Records the configuration reads of a reader: the key, the value used, where it came from.
public final class AccessRecorder: AccessReporter, Sendable {
    public struct Read: Sendable {
        /// The dotted key.
        public var key: String
        /// The value used, the default when no source had one; `nil` for an optional key left unset.
        public var value: ConfigValue?
        /// `arguments`, `environment`, `file`, or `default`.
        public var source: String
        var conversionError: String?
        var type: ConfigType
        var typeName: String { AccessRecorder.typeName(type) }

        /// The value for showing: secrets as `<secret>`.
        public var shownValue: String {
            guard let value else { return "(unset)" }
            if value.isSecret { return "<secret>" }
            switch value.content {
            case .string(let string): return string
            case .int(let int): return String(int)
            case .double(let double): return Self.number(double)
            case .bool(let bool): return String(bool)
            case .stringArray(let list): return "[" + list.joined(separator: ", ") + "]"
            case .intArray(let list): return "[" + list.map(String.init).joined(separator: ", ") + "]"
            case .doubleArray(let list): return "[" + list.map(Self.number).joined(separator: ", ") + "]"
            case .boolArray(let list): return "[" + list.map { String($0) }.joined(separator: ", ") + "]"
            case .bytes, .byteChunkArray: return "(bytes)"
            }
        }

        /// A number as the operator wrote it: `10`, not `10.0`, for a whole number of seconds.
        static func number(_ value: Double) -> String {
            value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : String(value)
        }
    }

    private let reads = Mutex<[Read]>([])

    public init() {}

    public var events: [Read] { reads.withLock { $0 } }

    public func report(_ event: AccessEvent) {
        let source = event.providerResults.first { result in
            if case .success(let lookup) = result.result, lookup.value != nil { return true }
            if case .failure = result.result { return true }
            return false
        }
        var value = try? event.result.get()
        var conversionError = event.conversionError.map { "\($0)" }
        let sourceName = source.map { Self.sourceName($0.providerName) } ?? "default"
        if let source, case .success(let lookup) = source.result, let raw = lookup.value, conversionError != nil {
            value = raw
        }
        if let source, case .failure(let error) = source.result {
            conversionError = "\(error)"
            value = nil
        }
        let read = Read(
            key: event.metadata.key.components.joined(separator: "."),
            value: value,
            source: sourceName,
            conversionError: conversionError,
            type: event.metadata.valueType
        )
        reads.withLock { $0.append(read) }
    }

    private static func sourceName(_ provider: String) -> String {
        if provider.contains("arguments") { return "command line" }
        if provider.contains("file") { return "file" }
        if provider.lowercased().contains("environment") { return "environment" }
        return provider
    }

    static func typeName(_ type: ConfigType) -> String {
        switch type {
        case .int: "an integer"
        case .double: "a number"
        case .bool: "true or false"
        case .string: "a string"
        case .stringArray: "a list of strings"
        case .intArray: "a list of integers"
        case .doubleArray: "a list of numbers"
        case .boolArray: "a list of true/false"
        default: "a \(type)"
        }
    }
}
