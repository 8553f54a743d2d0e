import CCurlShim
import CLibCurl
import Foundation
import Synchronization

/// One HTTP request for ``HTTP2Client``.
public struct HTTP2Request: Sendable {
    public var url: String
    public var method: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// The whole exchange, connection set-up included.
    public var timeout: Duration

    public init(url: String, method: String = "POST", headers: [(name: String, value: String)] = [], body: [UInt8] = [], timeout: Duration = .seconds(30)) {
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// A response: status, headers (names lower-cased) and body.
public struct HTTP2Response: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// The HTTP version curl used (2 for HTTP/2).
    public var httpVersion: Int

    /// The first header with this (lower-case) name.
    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

/// A transfer that failed below HTTP: connection refused, TLS, timeout, HTTP/2 stream errors.
public struct CurlError: Error, Sendable, CustomStringConvertible {
    /// libcurl's `CURLcode`.
    public var code: Int
    public var message: String

    /// Whether trying again (on a new stream or connection) can succeed: connection loss, GOAWAY and
    /// refused streams (libcurl 7.88 does not retry those itself), timeouts.
    public var isRetryable: Bool {
        switch CURLcode(rawValue: UInt32(code)) {
        case CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_COULDNT_CONNECT,
            CURLE_OPERATION_TIMEDOUT, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_COULDNT_RESOLVE_HOST, CURLE_SSL_CONNECT_ERROR:
            true
        default: false
        }
    }

    public var description: String { "CurlError(\(code)): \(message)" }
}

/// Settings of an ``HTTP2Client``: one client is one connection pool, so APNs needs one per team.
public struct HTTP2ClientConfiguration: Sendable {
    /// Most connections per host. HTTP/2 multiplexes, so 1 or 2 is usually right.
    public var maxConnectionsPerHost: Int
    /// Streams per connection; curl's default is 100, APNs allows about 1000.
    public var maxConcurrentStreams: Int
    /// Extra CA bundle (PEM) to trust, such as the sandbox's CA.
    public var caFile: String?
    /// Client certificate for APNs certificate authentication.
    public var clientCertificate: ClientCertificate?
    public var connectTimeout: Duration

    /// A client certificate: `P12` (with its password) or `PEM` (with the key file, if separate).
    public struct ClientCertificate: Sendable {
        public var path: String
        public var type: String
        public var keyPath: String?
        public var password: String?

        public init(path: String, type: String, keyPath: String? = nil, password: String? = nil) {
            self.path = path
            self.type = type
            self.keyPath = keyPath
            self.password = password
        }
    }

    public init(
        maxConnectionsPerHost: Int = 1,
        maxConcurrentStreams: Int = 1000,
        caFile: String? = nil,
        clientCertificate: ClientCertificate? = nil,
        connectTimeout: Duration = .seconds(10)
    ) {
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.maxConcurrentStreams = maxConcurrentStreams
        self.caFile = caFile
        self.clientCertificate = clientCertificate
        self.connectTimeout = connectTimeout
    }
}

/// An async HTTP/2 client on libcurl's multi interface.
///
/// Requests from any task are handed to one event thread that drives every transfer with
/// `curl_multi_perform` / `curl_multi_poll`, woken by `curl_multi_wakeup` when work arrives. Requests
/// to one host share a few TLS connections, multiplexed (CURLPIPE_MULTIPLEX, PIPEWAIT). Completions
/// resume the callers' continuations; a cancelled task's transfer is removed at once.
///
/// Unchecked `Sendable`: the multi handle is used only by the event thread, except for
/// `curl_multi_wakeup`, which libcurl documents as callable from any thread.
public final class HTTP2Client: @unchecked Sendable {
    private let multi: UnsafeMutableRawPointer
    private let configuration: HTTP2ClientConfiguration
    private let state = Mutex(SharedState())
    private let stopped = Mutex<CheckedContinuation<Void, Never>?>(nil)
    private let stoppedFlag = Mutex(false)

    struct SharedState {
        var pending: [Transfer] = []
        var cancelled: [Int] = []
        var stopping = false
        var nextID = 0
    }

    public init(configuration: HTTP2ClientConfiguration = .init()) throws {
        guard CurlLibrary.initialize(), CurlLibrary.supportsHTTP2 else {
            throw CurlError(code: -1, message: "libcurl is not usable or lacks HTTP/2 support")
        }
        guard let multi = curl_multi_init() else { throw CurlError(code: -1, message: "curl_multi_init failed") }
        self.multi = multi
        self.configuration = configuration
        pushrelay_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX)
        pushrelay_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxConnectionsPerHost)
        pushrelay_curl_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, configuration.maxConcurrentStreams)
        let loop = EventLoop(multi: multi, configuration: configuration, client: self)
        let thread = Thread { loop.run() }
        thread.name = "push-relay-curl"
        thread.start()
    }

    deinit {
        curl_multi_cleanup(multi)
    }

    /// Sends a request and returns its response; throws ``CurlError`` below HTTP.
    public func send(_ request: HTTP2Request) async throws -> HTTP2Response {
        let transfer = Transfer(request: request)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.continuation = continuation
                let accepted = state.withLock { state in
                    guard !state.stopping else { return false }
                    state.nextID += 1
                    transfer.id = state.nextID
                    state.pending.append(transfer)
                    return true
                }
                if accepted {
                    curl_multi_wakeup(multi)
                } else {
                    transfer.continuation = nil
                    continuation.resume(throwing: CurlError(code: -2, message: "the HTTP/2 client is shut down"))
                }
            }
        } onCancel: {
            state.withLock { $0.cancelled.append(transfer.id) }
            curl_multi_wakeup(multi)
        }
    }

    /// Fails what is in flight and stops the event thread.
    public func shutdown() async {
        let alreadyStopped = stoppedFlag.withLock { $0 }
        if alreadyStopped { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let finished = stoppedFlag.withLock { flag -> Bool in
                if flag { return true }
                stopped.withLock { $0 = continuation }
                return false
            }
            if finished {
                continuation.resume()
                return
            }
            state.withLock { $0.stopping = true }
            curl_multi_wakeup(multi)
        }
    }

    // MARK: Event thread

    fileprivate func take() -> (pending: [Transfer], cancelled: [Int], stopping: Bool) {
        state.withLock { state in
            defer {
                state.pending = []
                state.cancelled = []
            }
            return (state.pending, state.cancelled, state.stopping)
        }
    }

    fileprivate func loopExited() {
        stoppedFlag.withLock { $0 = true }
        let continuation = stopped.withLock { value -> CheckedContinuation<Void, Never>? in
            defer { value = nil }
            return value
        }
        continuation?.resume()
    }
}

/// One in-flight exchange. Owned by the event thread once queued; callbacks reach it through an
/// unretained pointer while curl holds the easy handle.
final class Transfer: @unchecked Sendable {
    let request: HTTP2Request
    var id = 0
    var continuation: CheckedContinuation<HTTP2Response, any Error>?
    var easy: UnsafeMutableRawPointer?
    var headerList: UnsafeMutablePointer<curl_slist>?
    var body: UnsafeMutableRawBufferPointer?
    var errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    var responseBody: [UInt8] = []
    var responseHeaders: [(name: String, value: String)] = []
    static let maxResponseBody = 1 << 20

    init(request: HTTP2Request) {
        self.request = request
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        if let easy { curl_easy_cleanup(easy) }
        if let headerList { curl_slist_free_all(headerList) }
        body?.deallocate()
        errorBuffer.deallocate()
    }

    func finish(_ result: Result<HTTP2Response, any Error>) {
        continuation?.resume(with: result)
        continuation = nil
    }
}

/// The event thread's state: only that thread touches it.
private final class EventLoop: @unchecked Sendable {
    let multi: UnsafeMutableRawPointer
    let configuration: HTTP2ClientConfiguration
    unowned let client: HTTP2Client
    var active: [Int: Transfer] = [:]

    init(multi: UnsafeMutableRawPointer, configuration: HTTP2ClientConfiguration, client: HTTP2Client) {
        self.multi = multi
        self.configuration = configuration
        self.client = client
    }

    func run() {
        while true {
            let (pending, cancelled, stopping) = client.take()
            for transfer in pending { start(transfer) }
            for id in cancelled {
                if let transfer = active.removeValue(forKey: id) { end(transfer, .failure(CancellationError())) }
            }
            if stopping {
                for transfer in active.values { end(transfer, .failure(CurlError(code: -2, message: "the HTTP/2 client is shut down"))) }
                active.removeAll()
                break
            }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            var remaining: Int32 = 0
            while let message = curl_multi_info_read(multi, &remaining) {
                var easy: UnsafeMutableRawPointer?
                var code = CURLE_OK
                guard pushrelay_curl_msg_done(message, &easy, &code) == 1, let easy else { continue }
                var pointer: UnsafeMutableRawPointer?
                pushrelay_curl_easy_getinfo_ptr(easy, CURLINFO_PRIVATE, &pointer)
                guard let pointer else { continue }
                let transfer = Unmanaged<Transfer>.fromOpaque(pointer).takeUnretainedValue()
                active.removeValue(forKey: transfer.id)
                end(transfer, complete(transfer, code: code))
            }
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
        client.loopExited()
    }

    private func start(_ transfer: Transfer) {
        guard let easy = curl_easy_init() else {
            transfer.finish(.failure(CurlError(code: -1, message: "curl_easy_init failed")))
            return
        }
        transfer.easy = easy
        let request = transfer.request
        pushrelay_curl_easy_setopt_string(easy, CURLOPT_URL, request.url)
        pushrelay_curl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        pushrelay_curl_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1)
        pushrelay_curl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        pushrelay_curl_easy_setopt_long(easy, CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        pushrelay_curl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(request.timeout.components.seconds * 1000 + request.timeout.components.attoseconds / 1_000_000_000_000_000))
        let connect = configuration.connectTimeout.components
        pushrelay_curl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(connect.seconds * 1000 + connect.attoseconds / 1_000_000_000_000_000))
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, transfer.errorBuffer)
        if let caFile = configuration.caFile { pushrelay_curl_easy_setopt_string(easy, CURLOPT_CAINFO, caFile) }
        if let certificate = configuration.clientCertificate {
            pushrelay_curl_easy_setopt_string(easy, CURLOPT_SSLCERT, certificate.path)
            pushrelay_curl_easy_setopt_string(easy, CURLOPT_SSLCERTTYPE, certificate.type)
            if let key = certificate.keyPath { pushrelay_curl_easy_setopt_string(easy, CURLOPT_SSLKEY, key) }
            if let password = certificate.password { pushrelay_curl_easy_setopt_string(easy, CURLOPT_KEYPASSWD, password) }
        }
        switch request.method {
        case "GET": pushrelay_curl_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
        case "POST": pushrelay_curl_easy_setopt_long(easy, CURLOPT_POST, 1)
        default: pushrelay_curl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method)
        }
        if request.method != "GET" {
            let body = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, request.body.count), alignment: 1)
            body.copyMemory(from: UnsafeRawBufferPointer(start: request.body, count: request.body.count))
            transfer.body = body
            pushrelay_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count))
            pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_POSTFIELDS, body.baseAddress)
        }
        var list: UnsafeMutablePointer<curl_slist>?
        // An empty Expect stops curl from waiting for 100-continue on larger bodies.
        for line in request.headers.map({ "\($0.name): \($0.value)" }) + ["Expect:"] {
            list = curl_slist_append(list, line)
        }
        transfer.headerList = list
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, list)

        let context = Unmanaged.passUnretained(transfer).toOpaque()
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_PRIVATE, context)
        pushrelay_curl_easy_setopt_write_callback(easy) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            guard transfer.responseBody.count + length <= Transfer.maxResponseBody else { return 0 }
            if let data { transfer.responseBody.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length)) }
            return length
        }
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, context)
        pushrelay_curl_easy_setopt_header_callback(easy) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            guard let data else { return length }
            let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            if line.hasPrefix("HTTP/") {
                transfer.responseHeaders = []
            } else if let colon = line.firstIndex(of: ":") {
                transfer.responseHeaders.append(
                    (String(line[..<colon]).lowercased(), String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
                )
            }
            return length
        }
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, context)

        let added = curl_multi_add_handle(multi, easy)
        guard added == CURLM_OK else {
            transfer.finish(.failure(CurlError(code: Int(added.rawValue), message: String(cString: curl_multi_strerror(added)))))
            return
        }
        active[transfer.id] = transfer
    }

    private func complete(_ transfer: Transfer, code: CURLcode) -> Result<HTTP2Response, any Error> {
        guard code == CURLE_OK, let easy = transfer.easy else {
            let detail = String(cString: transfer.errorBuffer)
            let message = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
            return .failure(CurlError(code: Int(code.rawValue), message: message))
        }
        var status = 0
        pushrelay_curl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        var version = 0
        pushrelay_curl_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
        return .success(
            HTTP2Response(
                status: status, headers: transfer.responseHeaders, body: transfer.responseBody,
                httpVersion: version == Int(CURL_HTTP_VERSION_2_0) ? 2 : version == Int(CURL_HTTP_VERSION_1_1) ? 1 : version
            )
        )
    }

    /// Removes the handle from the multi and answers the caller.
    private func end(_ transfer: Transfer, _ result: Result<HTTP2Response, any Error>) {
        if let easy = transfer.easy { curl_multi_remove_handle(multi, easy) }
        transfer.finish(result)
    }
}
