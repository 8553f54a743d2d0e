import Configuration
import Foundation
import TestSupport
import Testing

@testable import PushRelay

/// A configuration mistake is an error that names the key, never a silent default.
@Suite("Strict configuration")
struct StrictConfigurationTests {
    static func file(_ text: String) throws -> String {
        let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-strict-\(UUID().uuidString).yaml")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func refusal(_ yaml: String, environment: [String: String] = [:]) async throws -> String {
        let path = try file(yaml)
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let reader = try await ConfigReader.pushRelay(configFile: path, environment: environment)
            _ = try await AppConfiguration.loadChecked(reader: reader)
        } catch {
            return "\(error)"
        }
        Issue.record("accepted:\n\(yaml)")
        return ""
    }

    @Test("an unknown key in the file is an error naming it and the nearest known key")
    func unknownKeys() async throws {
        let port = try await Self.refusal("http:\n  prot: 47080\n")
        #expect(port.contains("unknown key 'http.prot' (line 2, column 3)") && port.contains("did you mean 'http.port'"), "\(port)")
        let url = try await Self.refusal("database:\n  uri: postgresql://db/relay\n")
        #expect(url.contains("'database.uri'") && url.contains("'database.url'"), "\(url)")
        let section = try await Self.refusal("webhook:\n  max_devices: 10\n")
        #expect(section.contains("'webhook.max_devices'") && section.contains("'webhooks.max_devices'"), "\(section)")
        let app = try await Self.refusal(
            """
            apps:
              - id: support
                webhook_secret: ["support-secret-0123456789"]
            """
        )
        #expect(app.contains("'support'") && app.contains("'webhook_secret'") && app.contains("'webhook_secrets'"), "\(app)")
        let nested = try await Self.refusal(
            """
            apps:
              - id: support
                webhook_secrets: ["support-secret-0123456789"]
                apns: {topic: com.example, token: {key_fil: /k.p8, key_id: ABCDEFGHIJ, team_id: ABCDEFGHIJ}}
            """
        )
        #expect(nested.contains("'apns.token.key_fil'") && nested.contains("'apns.token.key_file'"), "\(nested)")
    }

    @Test("a YAML syntax error names the file, line and column, never the text of the line (it may hold a secret)")
    func syntaxErrorsSayWhere() async throws {
        let secret = "whsec-never-in-a-log-0123456789"
        let cases: [(yaml: String, line: Int)] = [
            // Unclosed flow sequence under apps: (read by both the settings and the apps reader).
            ("http:\n  port: 8080\napps:\n  - id: support\n    webhook_secrets: [\"\(secret)\"\n", 6),
            // A mapping value where none may be, in the settings part.
            ("http:\n  port: 8080\nzendesk_secret: \(secret): x\n", 3),
            // A tab, which YAML refuses as indentation, on the line of an inline key.
            ("apps:\n  - id: support\n    webhook_secrets:\n\t- \(secret)\n", 4),
        ]
        for (yaml, line) in cases {
            let path = try Self.file(yaml)
            defer { try? FileManager.default.removeItem(atPath: path) }
            var messages: [String] = []
            do {
                let reader = try await ConfigReader.pushRelay(configFile: path, environment: [:])
                _ = try await AppConfiguration.loadChecked(reader: reader)
                Issue.record("accepted:\n\(yaml)")
            } catch {
                messages.append("\(error)")
            }
            do {
                _ = try AppConfiguration.load(configFile: path)
                Issue.record("the apps reader accepted:\n\(yaml)")
            } catch {
                messages.append("\(error)")
            }
            for message in messages {
                #expect(!message.contains(secret) && !message.contains("whsec"), "\(message)")
                #expect(message.contains("\(path):\(line):"), "\(message)")
                #expect(message.contains("not valid YAML"), "\(message)")
            }
        }
    }

    @Test("a value of the wrong type is an error, not the default")
    func wrongType() async throws {
        let message = try await Self.refusal("http:\n  port: eighty\n")
        #expect(message.contains("http.port") && message.contains("integer"), "\(message)")
        let variable = try await Self.refusal("http:\n  host: 127.0.0.1\n", environment: ["HTTP_PORT": "eighty"])
        #expect(variable.contains("http.port") && variable.contains("environment"), "\(variable)")
    }

    @Test("an unknown PUSH_RELAY_ variable is an error; known ones and other variables are not")
    func environment() async throws {
        let message = try await Self.refusal("http:\n  port: 8080\n", environment: ["PUSH_RELAY_ADMIN_KY": "x"])
        #expect(message.contains("PUSH_RELAY_ADMIN_KY") && message.contains("PUSH_RELAY_ADMIN_KEY"), "\(message)")
        let path = try Self.file("http:\n  port: 8080\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try await ConfigReader.pushRelay(
            configFile: path,
            environment: ["PUSH_RELAY_ADMIN_KEY": "x", "HTTP_PROXY": "http://proxy", "HTTP_HOST": "0.0.0.0"]
        )
        #expect(HTTPSettings(config: reader.scoped(to: "http")).host == "0.0.0.0")
    }

    @Test("the variables Kubernetes sets for a Service named push-relay are not refused; look-alikes still are")
    func kubernetesServiceLinks() async throws {
        let path = try Self.file("http:\n  port: 8080\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let links = [
            "PUSH_RELAY_SERVICE_HOST": "10.96.0.12", "PUSH_RELAY_SERVICE_PORT": "80", "PUSH_RELAY_SERVICE_PORT_HTTP": "80",
            "PUSH_RELAY_PORT": "tcp://10.96.0.12:80", "PUSH_RELAY_PORT_80_TCP": "tcp://10.96.0.12:80", "PUSH_RELAY_PORT_80_TCP_PROTO": "tcp",
            "PUSH_RELAY_PORT_80_TCP_PORT": "80", "PUSH_RELAY_PORT_80_TCP_ADDR": "10.96.0.12",
        ]
        _ = try await ConfigReader.pushRelay(configFile: path, environment: links)
        for name in ["PUSH_RELAY_PORT_HTTP", "PUSH_RELAY_PORT_80_TCP_HOST", "PUSH_RELAY_SERVICE", "PUSH_RELAY_PORTS"] {
            let message = try await Self.refusal("http:\n  port: 8080\n", environment: [name: "x"])
            #expect(message.contains("unknown environment variable \(name)"), "\(name): \(message)")
        }
    }

    @Test("every known key, and only those, is in docs/configuration.md; every app key too")
    func documented() throws {
        let text = try String(contentsOf: packageRoot(from: #filePath).appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        var documented = Set<String>()
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let cell = line.dropFirst(2).prefix { $0 != "|" }
            var parent = ""
            for (index, part) in cell.split(separator: "`").enumerated() where index % 2 == 0 {
                let name = String(part)
                guard name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "." }) else { continue }
                if name.contains(".") {
                    parent = String(name[..<name.lastIndex(of: ".")!])
                    documented.insert(name)
                } else {
                    documented.insert(parent.isEmpty ? name : parent + "." + name)
                }
            }
        }
        let known = Set(ConfigurationSchema.knownKeys + AppConfiguration.knownKeys)
        #expect(known.subtracting(documented).sorted() == [], "known keys missing from docs/configuration.md")
        let stray = documented.subtracting(known).subtracting(["apps"]).filter { !$0.hasPrefix("PUSH_RELAY") && $0 != "CONFIG_FILE" }
        #expect(stray.sorted() == [], "docs/configuration.md lists keys the code does not read")
    }

    @Test("the shipped example configuration passes the strict checks")
    func example() async throws {
        let path = packageRoot(from: #filePath).appendingPathComponent("Deploy/push-relay.example.yaml").path
        let reader = try await ConfigReader.pushRelay(configFile: path, environment: [:])
        #expect(HTTPSettings(config: reader.scoped(to: "http")).port > 0)
    }

    @Test("a webhook signing secret may be a list while it is rotated; each entry is checked")
    func signingSecretList() async throws {
        let path = try Self.file(
            """
            apps:
              - id: support
                webhook_secrets: ["support-secret-0123456789"]
                webhook_signing_secret: ["signing-secret-new-0123456789", "signing-secret-old-0123456789"]
            """
        )
        defer { try? FileManager.default.removeItem(atPath: path) }
        let apps = try AppConfiguration.load(configFile: path)
        #expect(apps[0].webhookSigningSecrets == ["signing-secret-new-0123456789", "signing-secret-old-0123456789"])
        let short = try await Self.refusal(
            """
            apps:
              - id: support
                webhook_secrets: ["support-secret-0123456789"]
                webhook_signing_secret: ["signing-secret-new-0123456789", "short"]
            """
        )
        #expect(short.contains("webhook_signing_secret"), "\(short)")
    }

    @Test("secrets are shown by fingerprint, which sha256sum reproduces, and a database without its password")
    func fingerprints() {
        // `printf %s support-secret-0123456789 | sha256sum | cut -c1-8` printed 01b504c9.
        #expect(SecretIdentifier.fingerprint("support-secret-0123456789") == "sha256:01b504c9")
        let app = AppConfiguration(id: "support", webhookSecrets: ["Zq9wSecret-0123456789"], webhookSigningSecret: "Xk3vSigning-0123456789")
        let summary = app.summary.joined(separator: "\n")
        #expect(!summary.contains("Zq9w") && !summary.contains("Xk3v"), "\(summary)")
        #expect(
            summary.contains(SecretIdentifier.fingerprint("Zq9wSecret-0123456789"))
                && summary.contains(SecretIdentifier.fingerprint("Xk3vSigning-0123456789"))
        )
        #expect(
            Database.summary(
                reader: ConfigReader(
                    provider: InMemoryProvider(values: [
                        "database.url": .init(.string("postgresql://relay:s3cret@db.internal:5433/pushrelay?sslmode=require"), isSecret: true)
                    ])
                )
            )
                == "host=db.internal port=5433 dbname=pushrelay user=relay"
        )
    }
}
