import ArgumentParser
import Foundation
import Logging
import PushRelay
import PushSandbox
import ServiceLifecycle
import UnixSignals

/// `push-relay sandbox`: the local APNs / FCM stand-in, on its own, with credentials a relay's
/// configuration can point at.
struct Sandbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the local APNs / FCM stand-in over HTTP/2 and TLS, with made-up credentials a relay can use.",
        discussion: """
            It keeps in --directory, reused on later starts so a configuration pointing at them keeps working (delete a file to have it made anew; \
            keys mode 0600): sandbox-ca.pem, the CA to trust (tls.ca_file, curl --cacert), and its key sandbox-ca-key.pem; \
            AuthKey_\(SandboxCredentials.apnsKeyID).p8, an APNs signing key (apns.token.key_file) with key id \(SandboxCredentials.apnsKeyID) and \
            team id \(SandboxCredentials.apnsTeamID); service-account.json, an FCM service account (fcm.service_account_file) whose token_uri is \
            this sandbox's /token, rewritten for the current port at each start.

            Once listening it prints the tls and apps sections of a relay configuration that delivers here.

            It checks credentials as Apple and Google do: a provider token signed by another key, or naming another key id or team, gets 403 \
            InvalidProviderToken; an OAuth assertion not signed with the service account's key gets 400 invalid_grant. GET /sandbox/received lists \
            what it received; PUT /sandbox/behaviours/{token} makes it answer a token with an error. POST /events receives an app's feedback events \
            (an app's events.url) and checks their signature with --events-secret-file.
            """
    )

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on (0: a free one, printed).")
    var port = 8443

    @Option(help: ArgumentHelp("Where the CA, the APNs key and the FCM service account are kept.", valueName: "dir"))
    var directory = ".push-relay-data/sandbox"

    @Option(
        help: ArgumentHelp(
            "A file holding the secret feedback events are signed with (an app's events.signing_secret_file). Without it, POST /events answers 401.",
            valueName: "file"
        )
    )
    var eventsSecretFile: String?

    func run() async throws {
        LoggingSystem.bootstrap { RelayLogHandler.standardError(label: $0) }
        var logger = Logger(label: "push-relay.sandbox")
        logger.logLevel = .info
        var eventSecret: String?
        if let eventsSecretFile {
            guard let data = FileManager.default.contents(atPath: eventsSecretFile) else {
                throw ValidationError("cannot read --events-secret-file \(eventsSecretFile)")
            }
            eventSecret = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        // Absolute, so the printed configuration works from any working directory.
        let directory = URL(fileURLWithPath: directory).standardizedFileURL.path
        let credentials = try SandboxCredentials.open(directory: directory)
        let configuration = SandboxConfiguration(
            host: host,
            port: port,
            directory: directory,
            apnsKeys: credentials.apnsKeys,
            serviceAccountKeys: credentials.serviceAccountKeys,
            eventSigningSecret: eventSecret,
            keepsCertificateAuthority: true
        )
        let service = SandboxService(configuration: configuration, logger: logger) { server in
            let url = "https://localhost:\(server.port)"
            let serviceAccount = try credentials.writeServiceAccount(sandboxURL: url, fileName: SandboxCredentials.serviceAccountFileName)
            print(Self.banner(url: url, caFile: server.certificates.caFile, credentials: credentials, serviceAccountFile: serviceAccount))
            fflush(nil)
        }
        let group = ServiceGroup(configuration: .init(services: [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    /// What is printed once the sandbox listens: where it is, what it wrote, and a configuration
    /// that delivers to it. The webhook secret is new each time; it is the relay's, not the sandbox's.
    static func banner(url: String, caFile: String, credentials: SandboxCredentials, serviceAccountFile: String) -> String {
        let secret = "sandbox-" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(24)
        return """
            sandbox: \(url)  CA: \(caFile)
            APNs key: \(credentials.apnsKeyFile)  key id: \(SandboxCredentials.apnsKeyID)  team id: \(SandboxCredentials.apnsTeamID)
            FCM service account: \(serviceAccountFile)  (\(SandboxCredentials.fcmClientEmail), token_uri \(url)/token)
            A relay configuration that delivers here (any apns topic is accepted; the webhook secret is yours to choose):

            tls:
              ca_file: \(quoted(caFile))
            apps:
              - id: sandbox
                webhook_secrets: [\(quoted(secret))]
                apns:
                  topic: com.example.app
                  url: \(url)
                  token: {key_file: \(quoted(credentials.apnsKeyFile)), key_id: \(SandboxCredentials.apnsKeyID), team_id: \
                  \(SandboxCredentials.apnsTeamID)}
                fcm:
                  service_account_file: \(quoted(serviceAccountFile))
                  url: \(url)
            """
    }

    /// A YAML double-quoted scalar (JSON's string syntax is valid YAML), so any path pastes safely.
    static func quoted(_ text: String) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: [text], options: [.withoutEscapingSlashes])) ?? Data("[\"\"]".utf8)
        return String(decoding: data, as: UTF8.self).dropFirst().dropLast().description
    }
}
