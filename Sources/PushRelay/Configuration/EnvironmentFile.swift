import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A file of `NAME=value` lines, as systemd's `EnvironmentFile=` reads it: the packaged units read
/// `/etc/push-relay/environment` that way, and `--env-file` reads the same file for a command run
/// by hand, so both see the same `DATABASE_URL`.
///
/// Blank lines and lines starting with `#` or `;` are skipped. A value is taken as written, with
/// whitespace around it dropped; in single quotes verbatim, in double quotes with `\"`, `\\`,
/// `` \` `` and `\$` unescaped; unquoted, a backslash keeps the next character and a trailing one
/// joins the next line. A line that is none of these is an error naming its number, never its
/// text: the file holds passwords.
public enum EnvironmentFile {
    /// The assignments of `text`, in order; `file` names it in errors.
    public static func parse(_ text: String, file: String) throws -> [(name: String, value: String)] {
        var assignments: [(name: String, value: String)] = []
        // By "\n" in UTF-16, not by Character: "\r\n" is one Character and would not split.
        let lines = text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).map {
            String(String.UnicodeScalarView($0))
        }
        var index = 0
        while index < lines.count {
            let number = index + 1
            var line = lines[index].trimmingCharacters(in: .whitespaces.union(["\r"]))
            index += 1
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            // A trailing backslash continues the line (unquoted values only, as in systemd).
            while line.hasSuffix("\\"), !line.hasSuffix("\\\\"), index < lines.count {
                line.removeLast()
                line += lines[index].trimmingCharacters(in: .whitespaces.union(["\r"]))
                index += 1
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigurationError("\(file), line \(number): expected NAME=value")
            }
            let name = line[..<equals].trimmingCharacters(in: .whitespaces)
            guard isValidName(name) else {
                throw ConfigurationError(
                    "\(file), line \(number): a variable name is letters, digits and '_', not starting with a digit (no 'export')"
                )
            }
            let raw = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard let value = unquoted(raw) else {
                throw ConfigurationError("\(file), line \(number): the value's quotes are not closed")
            }
            assignments.append((name, value))
        }
        return assignments
    }

    /// Reads the file at `path` and sets its variables in this process's environment, replacing
    /// those inherited (as `EnvironmentFile=` values replace a unit's `Environment=`). Called
    /// before the configuration is read and before any other thread reads the environment.
    public static func apply(path: String) throws {
        let data = try ConfiguredFile.read(path, what: "cannot read the environment file")
        for (name, value) in try parse(String(decoding: data, as: UTF8.self), file: path) {
            setenv(name, value, 1)
        }
    }

    static func isValidName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy {
            $0 == "_" || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
        }
    }

    /// The value with its quotes or escapes resolved; `nil` when a quote is not closed.
    static func unquoted(_ raw: String) -> String? {
        if raw.hasPrefix("'") {
            guard raw.count >= 2, raw.hasSuffix("'") else { return nil }
            let inner = raw.dropFirst().dropLast()
            return inner.contains("'") ? nil : String(inner)
        }
        var result = ""
        var characters = raw[...]
        let quoted = raw.hasPrefix("\"")
        if quoted {
            guard raw.count >= 2, raw.hasSuffix("\""), !raw.hasSuffix("\\\"") || raw.hasSuffix("\\\\\"") else {
                return nil
            }
            characters = raw.dropFirst().dropLast()
        }
        var escaped = false
        for character in characters {
            if escaped {
                // In double quotes only these are escapes; any other backslash stays as written.
                if quoted && !"\"\\`$".contains(character) { result.append("\\") }
                result.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if quoted && character == "\"" {
                return nil
            } else {
                result.append(character)
            }
        }
        if escaped { result.append("\\") }
        return result
    }
}
