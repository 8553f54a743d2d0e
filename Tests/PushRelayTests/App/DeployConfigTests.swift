import Foundation
import TestSupport
import Testing

/// The configurations shipped in `Deploy/` and shown in `docs/`: no log line they produce may hold
/// a webhook secret, a device token or a query string, and the proxy tells the relay the scheme.
@Suite("Shipped configurations: no secret in logs, X-Forwarded-Proto set")
struct DeployConfigTests {
    static let root = packageRoot(from: #filePath)

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// Lines of an HAProxy configuration without comments.
    static func directives(_ text: String) -> [String] {
        text.split(separator: "\n").map { line in
            String(line.prefix { $0 != "#" }).trimmingCharacters(in: .whitespaces)
        }.filter { !$0.isEmpty }
    }

    /// HAProxy log variables and fetches that carry the URL as sent (with the secret or the query).
    static let urlLogging = ["%HU", "%HP", "%HPO", "%HQ", "%[url", "%[path", "%[query", "%[capture.req.uri", "%[capture.req"]

    @Test("Deploy/haproxy.cfg logs the route without secrets, tokens or query, and sets X-Forwarded-Proto")
    func haproxy() throws {
        let lines = Self.directives(try Self.read("Deploy/haproxy.cfg"))
        #expect(!lines.contains { $0.hasPrefix("option httplog") || $0.hasPrefix("option httpslog") }, "option httplog logs the request line as sent")
        #expect(!lines.contains { $0.hasPrefix("capture request") }, "a captured header may hold a credential")
        let formats = lines.filter { $0.hasPrefix("log-format") }
        #expect(!formats.isEmpty, "without a log-format of its own HAProxy logs the request line")
        for format in formats {
            #expect(!Self.logsRequestLine(format), "the log-format logs %r, the request line")
            for variable in Self.urlLogging {
                #expect(!format.contains(variable), "the log-format logs \(variable)")
            }
            #expect(format.contains("%[var(txn.route)]"))
        }
        // What the route variable holds, worked out with the configuration's own expressions.
        let route = try #require(lines.first { $0.hasPrefix("http-request set-var(txn.route)") })
        #expect(route.contains("'path,"), "the route starts from the path, which has no query string")
        let substitutions = Self.regsubs(route)
        #expect(substitutions.count >= 3)
        let secret = "s3cr3t-0123456789abcdef"
        let token = "6b1c0f5e8d2a4b7c9e3f1a0d5c8b2e4f6a9d1c3b5e7f0a2d4c6b8e1f3a5c7d9e"
        for path in [
            "/v1/webhooks/zendesk/demo/\(secret)", "//v1//webhooks//zendesk/demo//\(secret)/", "/v1/webhooks/zendesk/demo/\(secret)/extra",
            "/v1/apps/demo/devices/\(token)", "/v1/apps/demo//devices///\(token)",
            // A device without a user is counted under its token: its unread paths carry it.
            "/v1/apps/demo/users/\(token)/unread", "//v1//apps/demo///users//\(token)/read-all",
        ] {
            var logged = path
            for (pattern, template) in substitutions {
                let expression = try NSRegularExpression(pattern: pattern)
                logged = expression.stringByReplacingMatches(
                    in: logged,
                    range: NSRange(logged.startIndex..., in: logged),
                    withTemplate: template.replacingOccurrences(of: "\\1", with: "$1")
                )
            }
            #expect(!logged.contains(secret) && !logged.contains(token), "\(path) is logged as \(logged)")
        }
        let forwarded = lines.filter { $0.hasPrefix("http-request set-header X-Forwarded-Proto") }
        #expect(forwarded.contains { $0.hasSuffix("https if { ssl_fc }") })
        #expect(forwarded.contains { $0.hasSuffix("http if !{ ssl_fc }") })
    }

    /// Whether an HAProxy log format has `%r` (with or without flags such as `%{+Q}r`), not to be
    /// confused with `%rc` or `%rt`.
    static func logsRequestLine(_ format: String) -> Bool {
        format.range(of: #"%(\{[^}]*\})?r(?![A-Za-z])"#, options: .regularExpression) != nil
    }

    /// The `regsub("pattern","template")` converters of an expression, in order.
    static func regsubs(_ line: String) -> [(String, String)] {
        var result: [(String, String)] = []
        var rest = Substring(line)
        while let start = rest.range(of: "regsub(\"") {
            rest = rest[start.upperBound...]
            guard let middle = rest.range(of: "\",\"") else { break }
            let pattern = String(rest[..<middle.lowerBound])
            rest = rest[middle.upperBound...]
            guard let end = rest.range(of: "\")") else { break }
            result.append((pattern, String(rest[..<end.lowerBound])))
            rest = rest[end.upperBound...]
        }
        return result
    }

    @Test("haproxy -c accepts Deploy/haproxy.cfg (when HAProxy is installed)")
    func haproxyCheck() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/haproxy") else { return }
        // The shipped file chroots and names a stats socket of the Debian package; checked as is.
        let run = try await ChildProcess.run("/usr/sbin/haproxy", ["-c", "-f", Self.root.appendingPathComponent("Deploy/haproxy.cfg").path])
        #expect(run.status == 0, "haproxy -c: \(run.output)\(run.error)")
    }

    @Test("no shipped configuration or document turns on HAProxy's or nginx's logging of full URLs")
    func everyConfiguration() throws {
        let deploy = try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("Deploy").path).map { "Deploy/\($0)" }
        let docs = try FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("docs").path).map { "docs/\($0)" }
        for path in (deploy + docs + ["README.md"]).sorted() {
            var directory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(path).path, isDirectory: &directory), !directory.boolValue
            else { continue }
            let text = try Self.read(path)
            for line in text.split(separator: "\n") {
                let code = line.trimmingCharacters(in: .whitespaces)
                guard !code.hasPrefix("#") else { continue }
                #expect(!code.hasPrefix("option httplog"), "\(path): \(code)")
                #expect(!(code.hasPrefix("log_format") && code.contains("$request")), "\(path): nginx logs the request line: \(code)")
                if code.hasPrefix("log-format") {
                    #expect(!Self.logsRequestLine(code), "\(path): \(code)")
                    for variable in Self.urlLogging { #expect(!code.contains(variable), "\(path): \(code)") }
                }
            }
        }
    }
}
