import Crypto
import CurlHTTP2
import Foundation
import Postgres
import PushSandbox
import Synchronization
import TestSupport
import Testing
import Yams
import _CryptoExtras

@testable import PushRelay

/// `push-relay sandbox`, run as an operator runs it: a process of its own whose printed
/// configuration, and the files it names, are all a relay gets.
struct SandboxProcess {
    let process: ChildProcess
    let output: String
    /// What it printed up to the configuration's last line.
    let printed: String

    /// Starts `push-relay sandbox --port 0 --directory directory` and waits for its configuration.
    static func start(directory: String) async throws -> SandboxProcess {
        let output = directory + "-sandbox-\(UUID().uuidString.prefix(8)).out"
        let process = try ChildProcess(
            try RelayProcess.executable,
            ["sandbox", "--port", "0", "--directory", directory],
            output: output,
            inheritsError: true
        )
        // The first start generates an RSA key, seconds in a debug build on a busy machine.
        let ready = await process.eventuallyWhileRunning {
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            return text.contains("service_account_file:") && text.hasSuffix("\n") && text.split(separator: "\n").last?.contains("url:") == true
        }
        let printed = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        guard ready else {
            if process.isRunning { process.interrupt() }
            await process.waitUntilExit()
            Issue.record("push-relay sandbox printed no configuration; it printed:\n\(printed)")
            throw CancellationError()
        }
        return SandboxProcess(process: process, output: output, printed: printed)
    }

    func stop() async {
        if process.isRunning { process.interrupt() }
        await process.waitUntilExit()
    }

    /// ``stop()`` for a `defer`, holding the thread until the sandbox has exited.
    func stop() {
        if process.isRunning { process.interrupt() }
        process.waitUntilExit()
    }

    /// The configuration it printed: the lines after the first empty one.
    var configurationText: String {
        let lines = printed.split(separator: "\n", omittingEmptySubsequences: false)
        guard let blank = lines.firstIndex(of: "") else { return "" }
        return lines[(blank + 1)...].joined(separator: "\n")
    }

    /// The printed configuration, parsed.
    func configuration() throws -> PrintedConfiguration {
        let root = try #require(try Yams.load(yaml: configurationText) as? [String: Any], "printed:\n\(printed)")
        let app = try #require((root["apps"] as? [[String: Any]])?.first)
        let apns = try #require(app["apns"] as? [String: Any])
        let token = try #require(apns["token"] as? [String: Any])
        let fcm = try #require(app["fcm"] as? [String: Any])
        return PrintedConfiguration(
            caFile: try #require((root["tls"] as? [String: Any])?["ca_file"] as? String),
            appID: try #require(app["id"] as? String),
            webhookSecret: try #require((app["webhook_secrets"] as? [String])?.first),
            topic: try #require(apns["topic"] as? String),
            apnsURL: try #require(apns["url"] as? String),
            keyFile: try #require(token["key_file"] as? String),
            keyID: try #require(token["key_id"] as? String),
            teamID: try #require(token["team_id"] as? String),
            serviceAccountFile: try #require(fcm["service_account_file"] as? String),
            fcmURL: try #require(fcm["url"] as? String)
        )
    }

    struct PrintedConfiguration {
        var caFile, appID, webhookSecret, topic, apnsURL, keyFile, keyID, teamID, serviceAccountFile, fcmURL: String
    }
}

@Suite("push-relay sandbox on its own: credentials, signature checks, a relay configured from what it prints", .serialized)
struct SandboxCommandTests {
    static func directory() -> String {
        (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-sandbox-command-\(UUID().uuidString.prefix(8))")
    }

    /// One alert to a random device token: the status and APNs' reason.
    static func push(_ client: HTTP2Client, _ printed: SandboxProcess.PrintedConfiguration, bearer: String) async throws -> (Int, String?) {
        let response = try await client.send(
            HTTP2Request(
                url: "\(printed.apnsURL)/3/device/\(apnsToken())",
                headers: [("authorization", "bearer \(bearer)"), ("apns-topic", printed.topic), ("apns-push-type", "alert")],
                body: Array(#"{"aps":{"alert":{"title":"t","body":"b"}}}"#.utf8),
                timeout: hangCeiling
            )
        )
        let reason = (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])?["reason"] as? String
        return (response.status, reason)
    }

    /// A provider token signed with `pem` (a P-256 key in PEM), naming `keyID` and `teamID`.
    static func providerToken(pem: String, keyID: String, teamID: String) async throws -> String {
        try await APNsTokenManager(privateKeyPEM: pem, keyID: keyID, teamID: teamID).token()
    }

    static func mode(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber).intValue & 0o777
    }

    /// The OAuth exchange of `account` against its `token_uri`: the access token, or the status
    /// and body of the refusal.
    static func exchange(_ client: HTTP2Client, account: ServiceAccount) async throws -> Result<String, ExchangeRefused> {
        let answer = LastAnswer()
        let tokens = try await FCMAccessTokenManager(account: account) { url, form in
            let response = try await client.send(
                HTTP2Request(url: url, headers: [("content-type", "application/x-www-form-urlencoded")], body: Array(form.utf8), timeout: hangCeiling)
            )
            answer.value.withLock { $0 = (response.status, response.body) }
            return (response.status, response.body)
        }
        do {
            return .success(try await tokens.token())
        } catch {
            let (status, body) = answer.value.withLock { $0 }
            return .failure(ExchangeRefused(status: status, body: (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: String] ?? [:]))
        }
    }

    final class LastAnswer: Sendable {
        let value = Mutex<(Int, [UInt8])>((0, []))
    }

    struct ExchangeRefused: Error {
        var status: Int
        var body: [String: String]
    }

    @Test(
        "it writes an APNs key, its ids and an FCM service account, prints a configuration naming them, and checks signatures as Apple and Google do"
    )
    func credentialsAndSignatures() async throws {
        let directory = Self.directory()
        let sandbox = try await SandboxProcess.start(directory: directory)
        defer { sandbox.stop() }
        let printed = try sandbox.configuration()
        #expect(printed.keyID == SandboxCredentials.apnsKeyID)
        #expect(printed.teamID == SandboxCredentials.apnsTeamID)
        #expect(printed.apnsURL == printed.fcmURL)
        #expect(sandbox.printed.contains("key id: \(printed.keyID)") && sandbox.printed.contains("team id: \(printed.teamID)"))
        for file in [printed.caFile, printed.keyFile, printed.serviceAccountFile] {
            #expect(file.hasPrefix("/"), "\(file) is not absolute")
            #expect((file as NSString).deletingLastPathComponent == directory)
        }
        #expect(try Self.mode(printed.keyFile) == 0o600)
        #expect(try Self.mode(printed.serviceAccountFile) == 0o600)
        #expect(try Self.mode(directory + "/sandbox-ca-key.pem") == 0o600)

        let client = try HTTP2Client(configuration: .init(maxConnectionsPerHost: 1, caFile: printed.caFile, connectTimeout: hangCeiling))
        // APNs: the written key is accepted; any other key, or another team, is InvalidProviderToken.
        let pem = try String(contentsOfFile: printed.keyFile, encoding: .utf8)
        let good = try await Self.providerToken(pem: pem, keyID: printed.keyID, teamID: printed.teamID)
        let (status, reason) = try await Self.push(client, printed, bearer: good)
        #expect(status == 200, "\(reason ?? "")")
        let stranger = P256.Signing.PrivateKey().pemRepresentation
        for bearer in [
            try await Self.providerToken(pem: stranger, keyID: printed.keyID, teamID: printed.teamID),
            try await Self.providerToken(pem: stranger, keyID: "UNKNOWNKEY", teamID: printed.teamID),
            try await Self.providerToken(pem: pem, keyID: printed.keyID, teamID: "OTHERTEAM1"),
        ] {
            let (status, reason) = try await Self.push(client, printed, bearer: bearer)
            #expect(status == 403)
            #expect(reason == "InvalidProviderToken")
        }

        // FCM: the written service account gets an access token from its token_uri, which FCM
        // accepts; the same account with another key is refused as Google refuses it.
        let data = try Data(contentsOf: URL(fileURLWithPath: printed.serviceAccountFile))
        let account = try JSONDecoder().decode(ServiceAccount.self, from: data)
        #expect(account.tokenURI == printed.fcmURL + "/token")
        let token = try await Self.exchange(client, account: account).get()
        let sent = try await client.send(
            HTTP2Request(
                url: "\(printed.fcmURL)/v1/projects/\(account.projectID)/messages:send",
                headers: [("authorization", "Bearer \(token)"), ("content-type", "application/json")],
                body: Array(#"{"message":{"token":"android-1","data":{"zendesk_sdk_request_id":"5"}}}"#.utf8),
                timeout: hangCeiling
            )
        )
        #expect(sent.status == 200)
        var forged = account
        forged.privateKey = try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation
        guard case .failure(let refused) = try await Self.exchange(client, account: forged) else {
            Issue.record("an assertion signed with another key got an access token")
            return
        }
        #expect(refused.status == 400)
        #expect(refused.body["error"] == "invalid_grant")
        #expect(refused.body["error_description"] == "Invalid JWT Signature.")
        var stranger2 = account
        stranger2.clientEmail = "someone@elsewhere.iam.gserviceaccount.com"
        guard case .failure(let unknown) = try await Self.exchange(client, account: stranger2) else {
            Issue.record("an unknown service account got an access token")
            return
        }
        #expect(unknown.status == 400)
        #expect(unknown.body["error"] == "invalid_grant")
        await client.shutdown()
    }

    @Test("a restarted sandbox keeps its CA, APNs key and service account key, so a configuration made from the first start still works")
    func restartKeepsCredentials() async throws {
        let directory = Self.directory()
        let first = try await SandboxProcess.start(directory: directory)
        let before = try first.configuration()
        let files = [before.caFile, before.keyFile, directory + "/sandbox-ca-key.pem"]
        let contents = try files.map { try String(contentsOfFile: $0, encoding: .utf8) }
        let accountBefore = try JSONDecoder().decode(ServiceAccount.self, from: Data(contentsOf: URL(fileURLWithPath: before.serviceAccountFile)))
        await first.stop()

        let second = try await SandboxProcess.start(directory: directory)
        defer { second.stop() }
        let after = try second.configuration()
        #expect(after.caFile == before.caFile && after.keyFile == before.keyFile && after.serviceAccountFile == before.serviceAccountFile)
        #expect(try files.map { try String(contentsOfFile: $0, encoding: .utf8) } == contents)
        let account = try JSONDecoder().decode(ServiceAccount.self, from: Data(contentsOf: URL(fileURLWithPath: after.serviceAccountFile)))
        #expect(account.privateKey == accountBefore.privateKey)
        #expect(account.tokenURI == after.fcmURL + "/token")

        // The CA file read before the restart is trusted, and the key signs accepted tokens.
        let caCopy = directory + "-ca-before.pem"
        try contents[0].write(toFile: caCopy, atomically: true, encoding: .utf8)
        let client = try HTTP2Client(configuration: .init(caFile: caCopy, connectTimeout: hangCeiling))
        let token = try await Self.providerToken(pem: contents[1], keyID: before.keyID, teamID: before.teamID)
        let (status, reason) = try await Self.push(client, after, bearer: token)
        #expect(status == 200, "\(reason ?? "")")
        #expect(try await Self.exchange(client, account: account).get().isEmpty == false)
        await client.shutdown()
    }

    @Test("a relay whose configuration is the printed one delivers to it over APNs and FCM")
    func relayFromPrintedConfiguration() async throws {
        let directory = Self.directory()
        let sandbox = try await SandboxProcess.start(directory: directory)
        defer { sandbox.stop() }
        let printed = try sandbox.configuration()
        let configFile = directory + "/push-relay.yaml"
        try """
        database:
          url: "\(try await TestDatabase.makeDatabase())"
          max_connections: 4
        delivery:
          poll_interval_ms: 100
          retry_base_ms: 100
        \(sandbox.configurationText)
        """.write(toFile: configFile, atomically: true, encoding: .utf8)
        let relay = try await RelayProcess.start(configFile: configFile, port: try EmbeddedPostgres.freePort(), log: directory + "/relay.log")
        defer { relay.stop() }
        let ios = apnsToken()
        let accepted = try await relay.request(
            "POST",
            "/v1/webhooks/zendesk/\(printed.appID)/\(printed.webhookSecret)",
            body: webhook(devices: [(ios, "ios"), ("android-sandbox-1", "android")])
        )
        #expect(accepted.status == 202)

        let client = try HTTP2Client(configuration: .init(caFile: printed.caFile, connectTimeout: hangCeiling))
        let delivered = try await eventually {
            let received = try await client.send(HTTP2Request(url: printed.apnsURL + "/sandbox/received", method: "GET", timeout: hangCeiling))
            let requests = (try? JSONSerialization.jsonObject(with: Data(received.body)) as? [String: Any])?["requests"] as? [[String: Any]] ?? []
            let ok = requests.filter { $0["status"] as? Int == 200 }
            return ok.contains { $0["service"] as? String == "apns" && ($0["path"] as? String)?.hasSuffix(ios) == true }
                && ok.contains { $0["service"] as? String == "fcm" && ($0["body"] as? String)?.contains("android-sandbox-1") == true }
        }
        await client.shutdown()
        #expect(delivered, "relay log: \((try? String(contentsOfFile: directory + "/relay.log", encoding: .utf8)) ?? "")")
    }
}
