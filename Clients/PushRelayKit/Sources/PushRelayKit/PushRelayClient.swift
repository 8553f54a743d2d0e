import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// PushRelay's client for one app on one device: registers the device's push token for the
/// signed-in user and keeps that user's unread count (``unread``).
///
/// ```swift
/// let relay = PushRelayClient(configuration: .init(baseURL: URL(string: "https://push.example.com")!, appID: "support"))
/// try await relay.setDeviceToken(deviceToken)            // didRegisterForRemoteNotificationsWithDeviceToken
/// try await relay.authorize(userID: "alice") { user in   // after sign-in
///     try await backend.pushRelayToken(for: user)         // a user JWT your backend signs
/// }
/// try await relay.deauthorize()                           // on sign-out
/// ```
///
/// The token and the user may come in either order: the device is registered once both are
/// known. A user JWT the relay refuses (expired, revoked) is replaced through the token provider
/// and the request sent again, once.
public actor PushRelayClient {
    public struct Configuration: Sendable {
        /// The relay's address, e.g. `https://push.example.com` (a path prefix is kept).
        public var baseURL: URL
        /// The app's id in the relay's configuration.
        public var appID: String
        /// What the device token is for.
        public var platform: Platform
        /// For APNs tokens: `.sandbox` for development builds, `.production` for TestFlight and
        /// the App Store; `nil` leaves it to the relay (the app's setting, learned per device).
        public var environment: APNsEnvironment?
        /// The device's locale, stored with the registration (e.g. `Locale.current.identifier`).
        public var locale: String?
        /// Seconds before a request without an answer fails.
        public var requestTimeout: TimeInterval
        /// Seconds without a byte on the live stream (the relay sends a heartbeat every 15 s by
        /// default) before it counts as broken and is opened again.
        public var streamIdleTimeout: TimeInterval
        /// The device's keys for encrypted pushes. When set, registration sends the current key
        /// (`push_key`, `push_key_id`), created and saved first when the store has none, and the
        /// relay encrypts replies for this device if the app's `push.content` is `encrypted`. Use a
        /// store the Notification Service Extension reads too (``KeychainPushKeyStore`` with a
        /// shared access group). `nil`: no key is sent.
        public var pushKeys: (any PushKeyStore)?

        public init(
            baseURL: URL,
            appID: String,
            platform: Platform = .ios,
            environment: APNsEnvironment? = nil,
            locale: String? = nil,
            requestTimeout: TimeInterval = 30,
            streamIdleTimeout: TimeInterval = 45,
            pushKeys: (any PushKeyStore)? = nil
        ) {
            self.baseURL = baseURL
            self.appID = appID
            self.platform = platform
            self.environment = environment
            self.locale = locale
            self.requestTimeout = requestTimeout
            self.streamIdleTimeout = streamIdleTimeout
            self.pushKeys = pushKeys
        }
    }

    public enum Platform: String, Sendable {
        case ios
        case android
    }

    public enum APNsEnvironment: String, Sendable {
        case production
        case sandbox
    }

    public nonisolated let configuration: Configuration
    /// The authorized user's unread count.
    public nonisolated let unread: UnreadCounter

    private let transport: Transport
    private var deviceToken: String?
    private var user: UserSession?
    /// The token, user and push key id the relay has the device registered for, as far as this
    /// client knows.
    private var registered: (token: String, userID: String, keyID: String?)?
    /// A registration whose removal failed (offline at sign-out): removed before the next one.
    private var staleRegistration: (token: String, user: UserSession)?

    /// - Parameter session: for tests and custom TLS; by default an ephemeral session without a
    ///   cache.
    public init(configuration: Configuration, session: URLSession? = nil) {
        self.configuration = configuration
        transport = Transport(
            baseURL: configuration.baseURL,
            appID: configuration.appID,
            session: session ?? Transport.makeSession(),
            timeout: configuration.requestTimeout
        )
        unread = UnreadCounter(transport: transport, streamIdleTimeout: configuration.streamIdleTimeout)
    }

    /// The identifier the relay knows an APNs token by: its bytes in lower-case hex.
    public nonisolated static func identifier(forDeviceToken token: Data) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(token.count * 2)
        for byte in token {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The authorized user, if any.
    public var userID: String? { user?.userID }

    /// The device token's identifier, once set.
    public var deviceIdentifier: String? { deviceToken }

    /// True once the relay confirmed the registration of this token for the current user.
    public var isRegistered: Bool {
        guard let registered, let user else { return false }
        return registered.token == deviceToken && registered.userID == user.userID
    }

    /// Sets the APNs device token (from `didRegisterForRemoteNotificationsWithDeviceToken`) and
    /// registers it when a user is authorized; otherwise it is kept until one is.
    public func setDeviceToken(_ token: Data) async throws(PushRelayError) {
        try await setDeviceToken(identifier: Self.identifier(forDeviceToken: token))
    }

    /// Sets the device token as the relay knows it (an FCM registration token, or an APNs token
    /// already in hex) and registers it as ``setDeviceToken(_:)`` does.
    public func setDeviceToken(identifier: String) async throws(PushRelayError) {
        if identifier != deviceToken, let registered, let user, registered.userID == user.userID {
            // The system replaced the token: the old one goes.
            try? await delete(token: registered.token, as: user)
            self.registered = nil
        }
        deviceToken = identifier
        await unread.setDeviceToken(identifier)
        try await registerDevice()
    }

    /// Authorizes `userID`: the counter starts, and the device is registered for the user as soon
    /// as its token is known. `tokenProvider` is asked for a user JWT now and whenever the relay
    /// refuses the last one.
    ///
    /// Authorizing the user already authorized changes nothing (no callback). A different user
    /// first ends the previous one's registration, and the counter reports 0 once before the new
    /// user's count.
    ///
    /// - Throws: the registration's error, if it fails; the user stays authorized, and the next
    ///   ``setDeviceToken(_:)``, ``authorize(userID:tokenProvider:)`` or ``registerDevice()`` tries again.
    public func authorize(userID: String, tokenProvider: @escaping UserTokenProvider) async throws(PushRelayError) {
        if let user, user.userID == userID {
            try await registerDevice()
            return
        }
        if let previous = user {
            user = nil
            await unread.deauthorize()
            await endRegistration(of: previous)
        }
        let session = UserSession(userID: userID, provider: tokenProvider)
        user = session
        await unread.authorize(session)
        try await registerDevice()
    }

    /// Signs the user out: the counter stops (no more callbacks) and the device is unregistered,
    /// so it gets no more of the user's pushes.
    ///
    /// - Throws: when the unregistration fails (offline); it is retried before the next
    ///   registration. The user is signed out either way.
    public func deauthorize() async throws(PushRelayError) {
        guard let previous = user else { return }
        user = nil
        await unread.deauthorize()
        if let error = await endRegistration(of: previous) { throw error }
    }

    /// Registers the device for the authorized user, with the current push key when
    /// ``Configuration/pushKeys`` is set, unless that was done already. Nothing happens without a
    /// token and a user.
    ///
    /// - Throws: ``PushRelayError/pushKeyStore(_:)`` when the key store fails; nothing is sent then.
    public func registerDevice() async throws(PushRelayError) {
        guard let token = deviceToken, let user else { return }
        if let stale = staleRegistration {
            try await delete(token: stale.token, as: stale.user)
            staleRegistration = nil
        }
        let key = try currentPushKey()
        if let registered, registered.token == token, registered.userID == user.userID, registered.keyID == key?.id { return }
        struct Body: Encodable {
            var platform: String
            var user_id: String
            var environment: String?
            var locale: String?
            var push_key: String?
            var push_key_id: String?
        }
        let body = try? JSONEncoder().encode(
            Body(
                platform: configuration.platform.rawValue,
                user_id: user.userID,
                environment: configuration.environment?.rawValue,
                locale: configuration.locale,
                push_key: key?.base64,
                push_key_id: key?.id
            )
        )
        _ = try await transport.sendExpectingSuccess(transport.request("PUT", ["devices", token], body: body), as: user)
        // Still the same user and token after the wait?
        if self.user === user, deviceToken == token { registered = (token, user.userID, key?.id) }
    }

    /// Replaces the device's push key: saves a new one in ``Configuration/pushKeys`` (which keeps
    /// the previous ones, so pushes already on their way still decrypt) and registers it when a
    /// token and a user are known; otherwise the next registration sends it. Nothing happens
    /// without a key store.
    ///
    /// - Throws: ``PushRelayError/pushKeyStore(_:)`` when the store fails, or the registration's
    ///   error; the new key stays saved and the next registration sends it.
    public func rotatePushKey() async throws(PushRelayError) {
        guard let store = configuration.pushKeys else { return }
        do {
            try store.save(PushKey.generate())
        } catch {
            throw .pushKeyStore(String(describing: error))
        }
        try await registerDevice()
    }

    /// The key registration sends: the store's current one, or a new one saved first; `nil`
    /// without a store.
    private func currentPushKey() throws(PushRelayError) -> PushKey? {
        guard let store = configuration.pushKeys else { return nil }
        do {
            if let key = try store.currentKey() { return key }
            let key = PushKey.generate()
            try store.save(key)
            return key
        } catch {
            throw .pushKeyStore(String(describing: error))
        }
    }

    /// Removes the registration `user` holds, or remembers it for later when that fails.
    @discardableResult
    private func endRegistration(of user: UserSession) async -> PushRelayError? {
        guard let registered, registered.userID == user.userID else { return nil }
        self.registered = nil
        do {
            try await delete(token: registered.token, as: user)
            return nil
        } catch {
            staleRegistration = (registered.token, user)
            return error
        }
    }

    private func delete(token: String, as user: UserSession) async throws(PushRelayError) {
        _ = try await transport.sendExpectingSuccess(transport.request("DELETE", ["devices", token]), as: user)
    }
}
