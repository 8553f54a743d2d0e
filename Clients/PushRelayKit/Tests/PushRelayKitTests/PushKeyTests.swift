import Foundation
import Testing

@testable import PushRelayKit

#if canImport(CryptoKit)
import CryptoKit
#else
import Crypto
#endif

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Encrypted pushes: keys, stores, decryption, registration")
struct PushKeyTests {
    /// `push_relay_ciphertext` as the spec builds it, with AES-GCM here rather than the library's code:
    /// base64(nonce || ciphertext || tag), associated data "push-relay:v1:<key id>:<notification id>".
    static func seal(_ plaintext: String, key: PushKey, keyID: String, notificationID: String) throws -> String {
        let sealed = try AES.GCM.seal(
            Data(plaintext.utf8),
            using: SymmetricKey(data: key.data),
            nonce: AES.GCM.Nonce(),
            authenticating: Data("push-relay:v1:\(keyID):\(notificationID)".utf8)
        )
        let combined = try #require(sealed.combined)
        #expect(combined.count == 12 + plaintext.utf8.count + 16)
        return combined.base64EncodedString()
    }

    static let reply = #"{"title":"Agent replied","body":"Your order ships today…"}"#

    /// An encrypted push's FCM data map.
    static func fcm(_ ciphertext: String, keyID: String = "k1", notificationID: String = "42") -> [String: String] {
        [
            "zendesk_sdk_request_id": "5", "title": "New reply", "body": "You have a new reply to your request.", "unread_count": "1",
            "push_relay_notification_id": notificationID, "push_relay_content": "encrypted", "push_relay_key_id": keyID,
            "push_relay_ciphertext": ciphertext,
        ]
    }

    /// An encrypted push's APNs payload as JSONSerialization reads it: the notification id a number.
    static func apns(_ ciphertext: String, keyID: String = "k1", notificationID: Int = 42) throws -> [AnyHashable: Any] {
        let json = """
            {"aps":{"alert":{"title-loc-key":"PUSH_RELAY_REPLY_TITLE","loc-key":"PUSH_RELAY_REPLY_BODY","title":"New reply",\
            "body":"You have a new reply to your request."},"badge":1,"sound":"default","thread-id":"5","mutable-content":1},\
            "zendesk_sdk_request_id":"5","push_relay_notification_id":\(notificationID),"push_relay_content":"encrypted",\
            "push_relay_key_id":"\(keyID)","push_relay_ciphertext":"\(ciphertext)"}
            """
        return try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [AnyHashable: Any])
    }

    @Test("a generated key: 32 random bytes in padded base64, a 12-character URL-safe id; invalid ids and lengths are refused")
    func generate() throws {
        let key = PushKey.generate()
        #expect(key.data.count == 32 && key.base64.count == 44 && key.base64.hasSuffix("="))
        #expect(Data(base64Encoded: key.base64) == key.data)
        #expect(key.id.count == 12 && PushKey.isValidID(key.id))
        #expect(key.id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        #expect(PushKey.generate().data != key.data && PushKey.generate().id != key.id)
        #expect(PushKey.generate(id: "k1").id == "k1")
        #expect(!key.description.contains(key.base64))
        #expect(PushKey(id: "Aa0-_.", data: Data(count: 32)) != nil && PushKey(id: String(repeating: "a", count: 64), data: Data(count: 32)) != nil)
        for id in ["", String(repeating: "a", count: 65), "a/b", "a b", "ä", "k:1"] { #expect(PushKey(id: id, data: Data(count: 32)) == nil) }
        #expect(PushKey(id: "k1", data: Data(count: 31)) == nil && PushKey(id: "k1", data: Data(count: 33)) == nil)
        #expect(PushKey(id: "k1", base64: "not base64") == nil)
    }

    @Test("a payload built as the spec says decrypts: APNs with a numeric id, FCM with a string id")
    func decrypts() throws {
        let key = PushKey.generate(id: "k1")
        let decryptor = PushRelayNotificationDecryptor(keys: InMemoryPushKeyStore(keys: [key]))
        let expected = PushRelayNotificationDecryptor.DecryptedReply(title: "Agent replied", body: "Your order ships today…")
        let ciphertext = try Self.seal(Self.reply, key: key, keyID: "k1", notificationID: "42")
        #expect(decryptor.decrypt(data: Self.fcm(ciphertext)) == expected)
        #expect(decryptor.decrypt(userInfo: try Self.apns(ciphertext)) == expected)
        // An NSNumber id, as APNs' userInfo holds it on Apple platforms.
        var userInfo = try Self.apns(ciphertext)
        userInfo["push_relay_notification_id"] = NSNumber(value: 42)
        #expect(decryptor.decrypt(userInfo: userInfo) == expected)
        let big = try Self.seal(#"{"title":"t","body":"b"}"#, key: key, keyID: "k1", notificationID: "9007199254740993")
        #expect(decryptor.decrypt(data: Self.fcm(big, notificationID: "9007199254740993")) == .init(title: "t", body: "b"))
    }

    @Test("any failure is nil: wrong key, other key id, a changed byte, another notification id, missing fields, bad base64 or JSON")
    func failures() throws {
        let key = PushKey.generate(id: "k1")
        let decryptor = PushRelayNotificationDecryptor(keys: InMemoryPushKeyStore(keys: [key, PushKey.generate(id: "k0")]))
        let ciphertext = try Self.seal(Self.reply, key: key, keyID: "k1", notificationID: "42")
        #expect(decryptor.decrypt(data: Self.fcm(ciphertext)) != nil)

        // The same id with other bytes, as after a reinstall.
        let otherBytes = PushRelayNotificationDecryptor(keys: InMemoryPushKeyStore(keys: [PushKey.generate(id: "k1")]))
        #expect(otherBytes.decrypt(data: Self.fcm(ciphertext)) == nil)
        #expect(decryptor.decrypt(data: Self.fcm(ciphertext, keyID: "k2")) == nil)  // not in the store
        #expect(decryptor.decrypt(data: Self.fcm(ciphertext, keyID: "k0")) == nil)  // in the store, not the key used
        #expect(decryptor.decrypt(data: Self.fcm(ciphertext, notificationID: "43")) == nil)
        #expect(decryptor.decrypt(userInfo: try Self.apns(ciphertext, notificationID: 43)) == nil)

        let sealed = try #require(Data(base64Encoded: ciphertext))
        for index in [0, 11, 12, sealed.count - 17, sealed.count - 16, sealed.count - 1] {  // nonce, ciphertext, tag
            var tampered = sealed
            tampered[index] ^= 0x01
            #expect(decryptor.decrypt(data: Self.fcm(tampered.base64EncodedString())) == nil, "byte \(index)")
        }
        #expect(decryptor.decrypt(data: Self.fcm(sealed.prefix(27).base64EncodedString())) == nil)  // shorter than nonce and tag
        #expect(decryptor.decrypt(data: Self.fcm(sealed.dropLast().base64EncodedString())) == nil)

        for field in ["push_relay_content", "push_relay_key_id", "push_relay_ciphertext", "push_relay_notification_id"] {
            var data = Self.fcm(ciphertext)
            data[field] = nil
            #expect(decryptor.decrypt(data: data) == nil, "without \(field)")
        }
        var generic = Self.fcm(ciphertext)
        generic["push_relay_content"] = "generic"
        #expect(decryptor.decrypt(data: generic) == nil)
        #expect(decryptor.decrypt(data: Self.fcm("%%%" + ciphertext)) == nil)
        #expect(decryptor.decrypt(data: Self.fcm(String(ciphertext.dropLast()))) == nil)  // padding cut
        for plaintext in [#"{"title":"t"}"#, #"{"title":1,"body":"b"}"#, "not JSON", #"["t","b"]"#] {
            let sealedText = try Self.seal(plaintext, key: key, keyID: "k1", notificationID: "42")
            #expect(decryptor.decrypt(data: Self.fcm(sealedText)) == nil, "\(plaintext)")
        }
    }

    @Test("rotation keeps the 3 newest keys; a push sent with an older kept key still decrypts", arguments: [false, true])
    func rotation(inFile: Bool) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("push-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let store: any PushKeyStore = inFile ? FilePushKeyStore(url: folder.appendingPathComponent("keys.json")) : InMemoryPushKeyStore()
        #expect(try store.currentKey() == nil)
        let keys = (1...4).map { PushKey.generate(id: "k\($0)") }
        for key in keys { try store.save(key) }
        #expect(try store.currentKey() == keys[3])
        #expect(try store.key(id: "k1") == nil)
        #expect(try [store.key(id: "k2"), store.key(id: "k3"), store.key(id: "k4")] == [keys[1], keys[2], keys[3]])
        let decryptor = PushRelayNotificationDecryptor(keys: store)
        let older = try Self.seal(#"{"title":"t","body":"b"}"#, key: keys[1], keyID: "k2", notificationID: "7")
        #expect(decryptor.decrypt(data: Self.fcm(older, keyID: "k2", notificationID: "7")) == .init(title: "t", body: "b"))
        let dropped = try Self.seal(#"{"title":"t","body":"b"}"#, key: keys[0], keyID: "k1", notificationID: "7")
        #expect(decryptor.decrypt(data: Self.fcm(dropped, keyID: "k1", notificationID: "7")) == nil)
        // Saving a kept id again makes it current without keeping a duplicate.
        try store.save(keys[1])
        #expect(try store.currentKey() == keys[1] && store.key(id: "k3") == keys[2] && store.key(id: "k4") == keys[3])
    }

    @Test("FilePushKeyStore: another instance reads what one saved; the file is mode 0600 and holds no extra copy")
    func fileStore() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("push-keys-\(UUID().uuidString)/nested")
        defer { try? FileManager.default.removeItem(at: folder.deletingLastPathComponent()) }
        let url = folder.appendingPathComponent("keys.json")
        let key = PushKey.generate()
        try FilePushKeyStore(url: url).save(key)
        try FilePushKeyStore(url: url).save(PushKey.generate(id: "next"))
        let reread = FilePushKeyStore(url: url)
        #expect(try reread.currentKey()?.id == "next")
        #expect(try reread.key(id: key.id) == key)
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["keys.json"])  // no temporary file left
        let json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let entries = try #require(json["keys"] as? [[String: String]])
        #expect(entries.map { $0["id"] } == ["next", key.id] && entries[1]["key"] == key.base64)

        try Data("{".utf8).write(to: url)
        #expect(throws: (any Error).self) { try reread.currentKey() }
    }

    @Test("push_relay_content: absent is full, generic, encrypted (with key id and ciphertext), in APNs and FCM shapes")
    func contentModes() throws {
        func apns(_ extra: String) throws -> PushRelayNotification {
            let json =
                #"{"aps":{"alert":{"title":"t","body":"b"},"badge":1},"zendesk_sdk_request_id":"5","push_relay_notification_id":9"# + extra + "}"
            let userInfo = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [AnyHashable: Any])
            return try #require(PushRelayNotification(userInfo: userInfo))
        }
        func fcm(_ extra: [String: String]) throws -> PushRelayNotification {
            try #require(PushRelayNotification(data: ["zendesk_sdk_request_id": "5", "push_relay_notification_id": "9"].merging(extra) { $1 }))
        }
        let ciphertext = Data((0..<40).map { UInt8($0) })
        let encryptedAPNs = try apns(
            #","push_relay_content":"encrypted","push_relay_key_id":"k1","push_relay_ciphertext":"\#(ciphertext.base64EncodedString())""#
        )
        let encryptedFCM = try fcm([
            "push_relay_content": "encrypted", "push_relay_key_id": "k1", "push_relay_ciphertext": ciphertext.base64EncodedString(),
        ])
        for push in [encryptedAPNs, encryptedFCM] {
            #expect(push.content == .encrypted && push.keyID == "k1" && push.ciphertext == ciphertext && push.notificationID == 9)
        }
        #expect(try apns("").content == .full && fcm([:]).content == .full)
        #expect(try apns("").keyID == nil && apns("").ciphertext == nil)
        #expect(try apns(#","push_relay_content":"generic""#).content == .generic)
        #expect(try fcm(["push_relay_content": "generic"]).content == .generic)
        #expect(try fcm(["push_relay_content": "full"]).content == .full)
        #expect(try fcm(["push_relay_content": "some-later-mode"]).content == .generic)
        #expect(try fcm(["push_relay_content": "encrypted", "push_relay_ciphertext": "%%"]).ciphertext == nil)
        // The initializer without the new fields still compiles and means a full push.
        #expect(PushRelayNotification(ticketID: "5", badge: nil, notificationID: 9, isBadgeSync: false).content == .full)
    }
}

/// Answers every request with 200 `{}` and records the device registrations (PUT) by host.
final class RegistrationStub: URLProtocol {
    static let bodies = Locked<[String: [[String: String]]]>([:])

    static func session() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [RegistrationStub.self]
        return URLSession(configuration: configuration)
    }

    override class func canInit(with request: URLRequest) -> Bool { true }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        if request.httpMethod == "PUT", let host = request.url?.host {
            let body = request.httpBody ?? request.httpBodyStream.map(RelayStub.read) ?? Data()
            let fields = (try? JSONSerialization.jsonObject(with: body) as? [String: String]) ?? ["unreadable": "\(body.count) bytes"]
            Self.bodies.withLock { $0[host, default: []].append(fields) }
        }
        let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: nil, headerFields: ["Content-Type": "application/json"])!
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: Data("{}".utf8))
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}
}

@Suite("Registration with push keys, against a stub")
struct PushKeyRegistrationTests {
    func client(_ host: String, keys: (any PushKeyStore)?) -> PushRelayClient {
        PushRelayClient(
            configuration: .init(baseURL: URL(string: "http://\(host)")!, appID: "support", pushKeys: keys),
            session: RegistrationStub.session()
        )
    }

    func registrations(_ host: String) -> [[String: String]] { RegistrationStub.bodies.withLock { $0[host] ?? [] } }

    @Test("a store without a key gets one, registration sends it; rotation saves a new one and registers it; the old one stays")
    func registersKey() async throws {
        let host = "keys-\(UUID().uuidString.lowercased()).test"
        let store = InMemoryPushKeyStore()
        let relay = client(host, keys: store)
        try await relay.rotatePushKey()  // before a token and a user: saved, nothing sent
        let first = try #require(store.currentKey())
        #expect(registrations(host).isEmpty)
        try await relay.setDeviceToken(identifier: "token-1")
        try await relay.authorize(userID: "alice") { _ in "jwt" }
        #expect(registrations(host) == [["platform": "ios", "user_id": "alice", "push_key": first.base64, "push_key_id": first.id]])
        try await relay.registerDevice()  // registered already with the current key: nothing sent
        #expect(registrations(host).count == 1)

        try await relay.rotatePushKey()
        let second = try #require(store.currentKey())
        #expect(second.id != first.id && store.key(id: first.id) == first)
        #expect(registrations(host).last == ["platform": "ios", "user_id": "alice", "push_key": second.base64, "push_key_id": second.id])
        #expect(registrations(host).count == 2)
        try await relay.deauthorize()
    }

    @Test("without a key store registration sends no key fields, and rotation does nothing")
    func noStore() async throws {
        let host = "nokeys-\(UUID().uuidString.lowercased()).test"
        let relay = client(host, keys: nil)
        try await relay.setDeviceToken(identifier: "token-1")
        try await relay.authorize(userID: "alice") { _ in "jwt" }
        try await relay.rotatePushKey()
        #expect(registrations(host) == [["platform": "ios", "user_id": "alice"]])
        try await relay.deauthorize()
    }

    @Test("a key store that fails: registration throws pushKeyStore and sends nothing")
    func failingStore() async throws {
        struct Failing: PushKeyStore {
            func currentKey() throws -> PushKey? { throw PushKeyStoreError("locked") }
            func key(id: String) throws -> PushKey? { throw PushKeyStoreError("locked") }
            func save(_ key: PushKey) throws { throw PushKeyStoreError("locked") }
        }
        let host = "failing-\(UUID().uuidString.lowercased()).test"
        let relay = client(host, keys: Failing())
        try await relay.setDeviceToken(identifier: "token-1")
        await #expect(throws: PushRelayError.pushKeyStore("locked")) { try await relay.authorize(userID: "alice") { _ in "jwt" } }
        await #expect(throws: PushRelayError.pushKeyStore("locked")) { try await relay.rotatePushKey() }
        #expect(registrations(host).isEmpty)
        #expect(await !relay.isRegistered)
        try await relay.deauthorize()
    }
}
