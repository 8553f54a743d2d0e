import Configuration
import Foundation
import Yams

/// Reads PushRelay's YAML configuration file into configuration values.
///
/// swift-configuration's own YAML provider rejects lists of mappings, and the `apps:` list is one,
/// so the file is parsed with Yams here: nested mappings become dotted keys (`http.port`), scalars
/// and lists of scalars become values, and `apps` is skipped (``AppConfiguration/load(configFile:)``
/// reads it). Values under keys that look secret are marked secret, so access reports redact them.
enum YAMLConfigFile {
    static func values(path: String) throws -> [AbsoluteConfigKey: ConfigValue] {
        let data = try ConfiguredFile.read(path, what: "cannot read the configuration file")
        let document: Any?
        do {
            document = try Yams.load(yaml: String(decoding: data, as: UTF8.self))
        } catch {
            throw ConfigurationError.invalidYAML(error, file: path)
        }
        guard let root = document else { return [:] }
        guard let mapping = root as? [String: Any] else {
            throw ConfigurationError("\(path) must hold a YAML mapping at the top")
        }
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        try flatten(mapping, path: [], into: &values, file: path)
        return values
    }

    /// Where the key at `path` (`["http", "prot"]`) is written in the YAML file at `file`: its
    /// line and column, counted from 1. `nil` when the file cannot be read again or has no such key.
    static func position(of path: [String], inFile file: String) -> (line: Int, column: Int)? {
        guard let data = try? ConfiguredFile.read(file, what: "cannot read the configuration file"),
            var node = try? Yams.compose(yaml: String(decoding: data, as: UTF8.self))
        else { return nil }
        var mark: Mark?
        for component in path {
            guard case .mapping(let mapping) = node,
                let entry = mapping.first(where: { $0.key.string == component })
            else { return nil }
            mark = entry.key.mark
            node = entry.value
        }
        return mark.map { ($0.line, $0.column) }
    }

    private static func flatten(
        _ mapping: [String: Any],
        path: [String],
        into values: inout [AbsoluteConfigKey: ConfigValue],
        file: String
    ) throws {
        for (key, value) in mapping {
            let keyPath = path + [key]
            if keyPath == ["apps"] { continue }
            let secret = isSecret(key)
            switch value {
            case let nested as [String: Any]:
                try flatten(nested, path: keyPath, into: &values, file: file)
            case let list as [Any]:
                if let strings = list as? [String] {
                    values[AbsoluteConfigKey(keyPath)] = .init(.stringArray(strings), isSecret: secret)
                } else if let ints = list as? [Int] {
                    values[AbsoluteConfigKey(keyPath)] = .init(.intArray(ints), isSecret: secret)
                } else if let doubles = list as? [Double] {
                    values[AbsoluteConfigKey(keyPath)] = .init(.doubleArray(doubles), isSecret: secret)
                } else if let bools = list as? [Bool] {
                    values[AbsoluteConfigKey(keyPath)] = .init(.boolArray(bools), isSecret: secret)
                } else {
                    throw ConfigurationError(
                        "\(file): \(keyPath.joined(separator: ".")) must be a list of plain values"
                    )
                }
            case let bool as Bool:
                values[AbsoluteConfigKey(keyPath)] = .init(.bool(bool), isSecret: secret)
            case let int as Int:
                values[AbsoluteConfigKey(keyPath)] = .init(.int(int), isSecret: secret)
            case let double as Double:
                values[AbsoluteConfigKey(keyPath)] = .init(.double(double), isSecret: secret)
            case let string as String:
                values[AbsoluteConfigKey(keyPath)] = .init(.string(string), isSecret: secret)
            case is NSNull:
                continue
            default:
                values[AbsoluteConfigKey(keyPath)] = .init(.string("\(value)"), isSecret: secret)
            }
        }
    }

    /// Names that carry secrets by convention.
    static func isSecret(_ key: String) -> Bool {
        let lower = key.lowercased()
        return lower == "url" || lower.hasSuffix("_url") || lower.contains("secret") || lower.contains("password")
            || lower.contains("token") || lower.hasSuffix("key")
    }
}
