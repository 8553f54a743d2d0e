import Yams

extension ConfigurationError {
    /// A file that is not valid YAML, by where: `file:line:column` and libyaml's fixed wording of the
    /// problem ("mapping values are not allowed in this context"). Never the offending line, which
    /// can hold a webhook secret or an inline key, and which Yams' own description quotes.
    static func invalidYAML(_ error: any Error, file: String) -> ConfigurationError {
        var underlying: any Error = error
        if case .dataCorrupted(let context) = error as? DecodingError, let cause = context.underlyingError {
            underlying = cause
        }
        guard let yaml = underlying as? YamlError else { return ConfigurationError("\(file) is not valid YAML") }
        switch yaml {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _),
            .composer(_, let problem, let mark, _):
            return ConfigurationError("\(file):\(mark.line):\(mark.column): not valid YAML: \(problem)")
        case .reader(let problem, let offset, _, _):
            return ConfigurationError("\(file)\(offset.map { " at byte \($0)" } ?? ""): not valid YAML: \(problem)")
        case .duplicatedKeysInMapping(_, let context):
            return ConfigurationError(
                "\(file):\(context.mark.line):\(context.mark.column): not valid YAML: a key is repeated in a mapping"
            )
        default:
            return ConfigurationError("\(file) is not valid YAML")
        }
    }
}
