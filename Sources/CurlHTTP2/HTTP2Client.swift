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

    public init(
        url: String,
        method: String = "POST",
        headers: [(name: String, value: String)] = [],
        body: [UInt8] = [],
        timeout: Duration = .seconds(30)
    ) {
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
    public var body: [UInt8]
    /// The HTTP version curl used (2 for HTTP/2).
    public var httpVersion: Int
    /// The header lines as curl delivered them ("name: value\r\n" …), split only when asked: callers
    /// read one or two headers, and the event thread should not build strings for the rest.
    var headerBlock: [UInt8]

    init(status: Int, headerBlock: [UInt8], body: [UInt8], httpVersion: Int) {
        self.status = status
        self.headerBlock = headerBlock
        self.body = body
        self.httpVersion = httpVersion
    }

    /// Every header, in order: names lower-cased, values without surrounding blanks.
    public var headers: [(name: String, value: String)] {
        var result: [(name: String, value: String)] = []
        forEachHeader { name, value in
            result.append((String(decoding: name.lazy.map(Self.lower), as: UTF8.self), String(decoding: value, as: UTF8.self)))
            return true
        }
        return result
    }

    /// The first header with this name (compared without regard to case).
    public func header(_ name: String) -> String? {
        let wanted = Array(name.utf8)
        var found: String?
        forEachHeader { candidate, value in
            guard candidate.count == wanted.count, zip(candidate, wanted).allSatisfy({ Self.lower($0) == Self.lower($1) }) else { return true }
            found = String(decoding: value, as: UTF8.self)
            return false
        }
        return found
    }

    /// Calls `body` with each header line's name and value until it returns false.
    private func forEachHeader(_ body: (Slice<UnsafeBufferPointer<UInt8>>, Slice<UnsafeBufferPointer<UInt8>>) -> Bool) {
        func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        headerBlock.withUnsafeBufferPointer { block in
            var start = 0
            while start < block.count {
                var end = start
                while end < block.count, block[end] != 0x0A { end += 1 }
                let next = end + 1
                while end > start, isBlank(block[end - 1]) { end -= 1 }
                if let colon = block[start..<end].firstIndex(of: UInt8(ascii: ":")) {
                    var valueStart = colon + 1
                    while valueStart < end, isBlank(block[valueStart]) { valueStart += 1 }
                    if !body(block[start..<colon], block[valueStart..<end]) { return }
                }
                start = next
            }
        }
    }

    private static func lower(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }
}

/// A transfer that failed below HTTP: connection refused, TLS, timeout, HTTP/2 stream errors.
public struct CurlError: Error, Sendable, CustomStringConvertible {
    /// libcurl's `CURLcode`.
    public var code: Int
    public var message: String

    public init(code: Int, message: String) {
        self.code = code
        self.message = message
    }

    /// The client's own codes, below libcurl's range.
    public static let setupFailed = -1
    public static let shutDown = -2
    public static let invalidHeader = -3

    /// What a request gets when the client is or goes down before answering it.
    static let clientShutDown = CurlError(code: shutDown, message: "the HTTP/2 client is shut down")

    /// Whether trying again (on a new stream or connection) can succeed: connection loss, GOAWAY and
    /// refused streams (libcurl 7.88 does not retry those itself), timeouts; and a request the
    /// client never started because it was shutting down or could not set up a handle. A header
    /// that cannot be sent is not.
    public var isRetryable: Bool {
        if code < 0 { return code == Self.setupFailed || code == Self.shutDown }
        return switch CURLcode(rawValue: UInt32(code)) {
        case CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_COULDNT_CONNECT,
            CURLE_OPERATION_TIMEDOUT, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_COULDNT_RESOLVE_HOST, CURLE_SSL_CONNECT_ERROR:
            true
        default: false
        }
    }

    /// Whether libcurl or the client refused the request itself before sending it: a header that
    /// would break a line, a URL it cannot parse, an option it rejects. Sending it again fails the same way.
    public var isRequestInvalid: Bool {
        if code < 0 { return code == Self.invalidHeader }
        return switch CURLcode(rawValue: UInt32(code)) {
        case CURLE_URL_MALFORMAT, CURLE_BAD_FUNCTION_ARGUMENT, CURLE_UNSUPPORTED_PROTOCOL: true
        default: false
        }
    }

    /// Whether the TLS set-up failed on configuration: the server's certificate did not verify
    /// against the trusted CAs, or the client certificate, its key or a CA file could not be used.
    /// The settings must change; no request can fix it.
    public var isTLSConfiguration: Bool {
        guard code >= 0 else { return false }
        return switch CURLcode(rawValue: UInt32(code)) {
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CRL_BADFILE,
            CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_ENGINE_NOTFOUND,
            CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_SSL_CLIENTCERT:
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
    /// Streams per connection. Keep it below the server's advertised limit: libcurl 7.88 can open
    /// streams beyond it, and a server that refuses them after starting work makes a retried
    /// request arrive twice. The client also holds back transfers beyond
    /// `maxConcurrentStreams × maxConnectionsPerHost` in its own queue.
    public var maxConcurrentStreams: Int
    /// Extra CA bundle (PEM) to trust, such as the sandbox's CA.
    public var caFile: String?
    /// Client certificate for APNs certificate authentication.
    public var clientCertificate: ClientCertificate?
    public var connectTimeout: Duration
    /// Event threads, each with its own multi handle and so its own connections: requests are
    /// spread over them in turn. One thread drives a few tens of thousands of requests a second
    /// (libcurl's cost per transfer); more use more cores, and `maxConnectionsPerHost` applies to
    /// each thread.
    public var eventThreads: Int

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
        maxConcurrentStreams: Int = 90,
        caFile: String? = nil,
        clientCertificate: ClientCertificate? = nil,
        connectTimeout: Duration = .seconds(10),
        eventThreads: Int = 1
    ) {
        self.eventThreads = max(1, eventThreads)
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
public final class HTTP2Client: Sendable {
    /// One per event thread.
    private let lanes: [Shared]
    /// The lane the next request goes to, in turn.
    private let nextLane = Atomic<Int>(0)

    /// What the client and its event thread share. The thread owns the multi handle's lifetime:
    /// it cleans it up when it exits, under the same lock that guards every wake-up, so a late
    /// `curl_multi_wakeup` can never touch a freed handle.
    final class Shared: @unchecked Sendable {
        let multi: UnsafeMutableRawPointer
        let state = Mutex(SharedState())
        /// The TLS connections the event thread tracks for read-ahead, as of its last pass.
        let readAheadConnections = Atomic<Int>(0)

        init(multi: UnsafeMutableRawPointer) { self.multi = multi }

        /// Wakes the event thread, unless it is gone.
        func wake() {
            state.withLock { state in
                if !state.exited { curl_multi_wakeup(multi) }
            }
        }
    }

    struct SharedState {
        var pending: [Transfer] = []
        var cancelled: [Int] = []
        var stopping = false
        var exited = false
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
        var nextID = 0
    }

    public init(configuration: HTTP2ClientConfiguration = .init()) throws {
        guard CurlLibrary.initialize(), CurlLibrary.supportsHTTP2 else {
            throw CurlError(code: CurlError.setupFailed, message: "libcurl is not usable or lacks HTTP/2 support")
        }
        var lanes: [Shared] = []
        for _ in 0..<configuration.eventThreads {
            guard let multi = curl_multi_init() else {
                for lane in lanes { Self.stop(lane) }
                throw CurlError(code: CurlError.setupFailed, message: "curl_multi_init failed")
            }
            pushrelay_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX)
            pushrelay_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxConnectionsPerHost)
            pushrelay_curl_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, configuration.maxConcurrentStreams)
            let shared = Shared(multi: multi)
            let loop = EventLoop(shared: shared, configuration: configuration)
            Thread { loop.run() }.start()
            lanes.append(shared)
        }
        self.lanes = lanes
    }

    deinit {
        // A client dropped without shutdown() still stops its threads.
        for lane in lanes { Self.stop(lane) }
    }

    private static func stop(_ lane: Shared) {
        lane.state.withLock { $0.stopping = true }
        lane.wake()
    }

    /// TLS connections reading ahead, over all event threads, as of each thread's last pass
    /// (and 0 once the client is shut down and its connections freed).
    package var readAheadConnections: Int { lanes.reduce(0) { $0 + $1.readAheadConnections.load(ordering: .relaxed) } }

    /// Sends a request and returns its response; throws ``CurlError`` below HTTP, and
    /// `CancellationError` when the calling task is cancelled: a task cancelled before the request
    /// is queued sends nothing, and one cancelled later ends its transfer at once.
    public func send(_ request: HTTP2Request) async throws -> HTTP2Response {
        try Task.checkCancellation()
        // The header list and the body copy are made here, on the caller's thread: the event
        // thread is the client's bottleneck, so it only sets the handle's options and runs curl.
        let transfer = try Transfer(request: request)
        let shared = lanes.count == 1 ? lanes[0] : lanes[nextLane.wrappingAdd(1, ordering: .relaxed).oldValue % lanes.count]
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.continuation = continuation
                // Wake the event thread only for the first request of a batch: it takes the whole
                // queue at once, and each wake-up costs it a pass over every transfer.
                // The cancellation handler may have run before the transfer had its id (it runs at
                // once for a task cancelled before this point), naming no transfer; so cancellation
                // is checked again under the lock it takes, where it can no longer be missed.
                enum Queued { case wake, queued, stopping, cancelled }
                let queued: Queued = shared.state.withLock { state in
                    guard !state.stopping else { return .stopping }
                    guard !Task.isCancelled else { return .cancelled }
                    state.nextID += 1
                    transfer.id = state.nextID
                    state.pending.append(transfer)
                    return state.pending.count == 1 ? .wake : .queued
                }
                switch queued {
                case .wake:
                    shared.wake()
                case .queued:
                    break
                case .stopping:
                    transfer.continuation = nil
                    continuation.resume(throwing: CurlError.clientShutDown)
                case .cancelled:
                    transfer.continuation = nil
                    continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            shared.state.withLock { $0.cancelled.append(transfer.id) }
            shared.wake()
        }
    }

    /// Fails what is in flight and stops the event thread; returns once it has stopped.
    public func shutdown() async {
        for shared in lanes { await Self.shutdown(shared) }
    }

    private static func shutdown(_ shared: Shared) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let exited = shared.state.withLock { state -> Bool in
                if state.exited { return true }
                state.stopping = true
                state.exitWaiters.append(continuation)
                return false
            }
            if exited { continuation.resume() } else { shared.wake() }
        }
    }
}

/// One in-flight exchange. Owned by the event thread once queued; callbacks reach it through an
/// unretained pointer while curl holds the easy handle.
final class Transfer: @unchecked Sendable {
    let request: HTTP2Request
    var id = 0
    var continuation: CheckedContinuation<HTTP2Response, any Error>?
    var handle: EasyHandle?
    let headerList: UnsafeMutablePointer<curl_slist>
    /// A copy of the request body that stays put while curl reads it (nil for GET).
    let body: UnsafeMutableRawBufferPointer?
    var responseBody: [UInt8] = []
    var responseHeaders: [UInt8] = []
    static let maxResponseBody = 1 << 20

    /// Throws ``CurlError/invalidHeader`` for a header that would break a line, before anything is queued.
    init(request: HTTP2Request) throws(CurlError) {
        self.request = request
        headerList = try Self.makeHeaderList(request.headers)
        if request.method != "GET" {
            let body = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, request.body.count), alignment: 1)
            request.body.withUnsafeBytes { body.copyMemory(from: $0) }
            self.body = body
        } else {
            body = nil
        }
    }

    deinit {
        free(headerList)
        body?.deallocate()
    }

    /// One header line as curl hands it over ("Name: value\r\n", or the status line, which starts
    /// a new header block). Kept as bytes; ``HTTP2Response`` splits them when a caller asks.
    func receiveHeaderLine(_ line: UnsafeRawBufferPointer) {
        if line.count >= 5, line[0] == UInt8(ascii: "H"), line[1] == UInt8(ascii: "T"), line[2] == UInt8(ascii: "T"), line[3] == UInt8(ascii: "P"),
            line[4] == UInt8(ascii: "/")
        {
            responseHeaders.removeAll(keepingCapacity: true)
            return
        }
        responseHeaders.append(contentsOf: line)
    }

    func finish(_ result: Result<HTTP2Response, any Error>) {
        continuation?.resume(with: result)
        continuation = nil
    }

    /// The request's header list, built in one allocation. Fails when a name or value holds a
    /// control character (CR, LF and NUL would end or split a header line; nghttp2 refuses the
    /// others) or a name is empty, so such a request fails here as ``CurlError/invalidHeader``
    /// instead of somewhere inside libcurl.
    static func makeHeaderList(_ headers: [(name: String, value: String)]) throws(CurlError) -> UnsafeMutablePointer<curl_slist> {
        func breaksLine(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7F }
        var lines: [UInt8] = []
        lines.reserveCapacity(headers.reduce(20) { $0 + $1.name.utf8.count + $1.value.utf8.count + 3 })
        for (name, value) in headers {
            guard !name.isEmpty, !name.utf8.contains(where: breaksLine), !value.utf8.contains(where: breaksLine) else {
                throw CurlError(code: CurlError.invalidHeader, message: "a request header name or value contains a control character")
            }
            lines.append(contentsOf: name.utf8)
            lines.append(UInt8(ascii: ":"))
            lines.append(UInt8(ascii: " "))
            lines.append(contentsOf: value.utf8)
            lines.append(0)
        }
        // Empty Expect and Accept: no 100-continue wait on larger bodies, no "accept: */*" on every push.
        lines.append(contentsOf: "Expect:".utf8)
        lines.append(0)
        lines.append(contentsOf: "Accept:".utf8)
        lines.append(0)
        let count = headers.count + 2
        guard let list = lines.withUnsafeBufferPointer({ pushrelay_slist_from_lines($0.baseAddress, $0.count, count) }) else {
            throw CurlError(code: CurlError.setupFailed, message: "the request's header list could not be allocated")
        }
        return list
    }
}

/// An easy handle with every option that is the same for all requests already set, and its error
/// buffer. Handles are kept for reuse: configuring and freeing one per request costs more than the
/// request itself at high rates.
final class EasyHandle {
    let easy: UnsafeMutableRawPointer
    let errorBuffer: UnsafeMutablePointer<CChar>

    init?(configuration: HTTP2ClientConfiguration, loop: UnsafeMutableRawPointer, tls: OpaquePointer?) {
        guard let easy = curl_easy_init() else { return nil }
        self.easy = easy
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        pushrelay_curl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        pushrelay_curl_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1)
        pushrelay_curl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        pushrelay_curl_easy_setopt_long(easy, CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        pushrelay_curl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(configuration.connectTimeout))
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        if !Self.proxyFromEnvironment { pushrelay_curl_easy_setopt_string(easy, CURLOPT_PROXY, "") }
        // Read-ahead: one recv() per batch of TLS records instead of two per record (see shim.c),
        // with a libcurl that reads what OpenSSL holds (``CurlLibrary/readsAhead``).
        if CurlLibrary.readsAhead { pushrelay_curl_easy_setopt_read_ahead(easy, tls) }
        if let caFile = configuration.caFile { pushrelay_curl_easy_setopt_string(easy, CURLOPT_CAINFO, caFile) }
        if let certificate = configuration.clientCertificate {
            pushrelay_curl_easy_setopt_string(easy, CURLOPT_SSLCERT, certificate.path)
            pushrelay_curl_easy_setopt_string(easy, CURLOPT_SSLCERTTYPE, certificate.type)
            if let key = certificate.keyPath { pushrelay_curl_easy_setopt_string(easy, CURLOPT_SSLKEY, key) }
            if let password = certificate.password { pushrelay_curl_easy_setopt_string(easy, CURLOPT_KEYPASSWD, password) }
        }
        pushrelay_curl_easy_setopt_write_callback(easy) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            guard transfer.responseBody.count + length <= Transfer.maxResponseBody else { return 0 }
            if let data { transfer.responseBody.append(contentsOf: UnsafeRawBufferPointer(start: data, count: length)) }
            return length
        }
        pushrelay_curl_easy_setopt_header_callback(easy) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            guard let data else { return length }
            transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: data, count: length))
            return length
        }
        pushrelay_curl_easy_setopt_socket_callbacks(
            easy,
            loop,
            { loop, socket, purpose in
                if purpose == CURLSOCKTYPE_IPCXN {
                    Unmanaged<EventLoop>.fromOpaque(loop!).takeUnretainedValue().sockets.insert(socket)
                }
                return CURL_SOCKOPT_OK
            },
            { loop, socket in
                Unmanaged<EventLoop>.fromOpaque(loop!).takeUnretainedValue().sockets.remove(socket)
                return close(socket)
            }
        )
    }

    /// Whether a proxy is named in the environment (libcurl's variables: `http_proxy`, `https_proxy`,
    /// `HTTPS_PROXY`, `all_proxy`, `ALL_PROXY`). When none is, handles are told to use no proxy, so
    /// libcurl does not look the variables up again for every request.
    static let proxyFromEnvironment: Bool = {
        let environment = ProcessInfo.processInfo.environment
        return ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"].contains { !(environment[$0] ?? "").isEmpty }
    }()

    /// Points the handle at one transfer: everything that differs between requests is set here.
    func prepare(for transfer: Transfer) {
        let request = transfer.request
        errorBuffer[0] = 0
        pushrelay_curl_easy_setopt_string(easy, CURLOPT_URL, request.url)
        pushrelay_curl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Self.milliseconds(request.timeout))
        switch request.method {
        case "GET":
            pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, nil)
            pushrelay_curl_easy_setopt_long(easy, CURLOPT_HTTPGET, 1)
        case "POST":
            pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, nil)
            pushrelay_curl_easy_setopt_long(easy, CURLOPT_POST, 1)
        default:
            pushrelay_curl_easy_setopt_long(easy, CURLOPT_POST, 1)
            pushrelay_curl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, request.method)
        }
        if let body = transfer.body {
            pushrelay_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count))
            pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_POSTFIELDS, body.baseAddress)
        }
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, transfer.headerList)
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_PRIVATE, context)
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, context)
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, context)
    }

    /// A timeout for curl, from 1 ms to about 24 days (`Int32.max` ms): curl reads 0 as "no
    /// timeout", so a duration that is zero or negative (a deadline already passed) must still end
    /// the transfer, and a huge one must not overflow.
    static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        guard seconds < 2_000_000 else { return Int(Int32.max) }
        return max(1, Int(seconds * 1000 + attoseconds / 1_000_000_000_000_000))
    }

    /// Forgets the transfer's memory (header list, body, callback data) before it is freed.
    func detach() {
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, nil)
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_POSTFIELDS, nil)
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_PRIVATE, nil)
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, nil)
        pushrelay_curl_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, nil)
    }

    deinit {
        curl_easy_cleanup(easy)
        errorBuffer.deallocate()
    }
}

/// The event thread's state: only that thread touches it.
private final class EventLoop: @unchecked Sendable {
    /// The event threads' name (the kernel keeps 15 bytes).
    static let threadName = "push-relay-curl"
    let shared: HTTP2Client.Shared
    var multi: UnsafeMutableRawPointer { shared.multi }
    let configuration: HTTP2ClientConfiguration
    var active: [Int: Transfer] = [:]
    /// Transfers waiting for a free stream, oldest first.
    var backlog: [Transfer] = []
    /// Finished easy handles, configured, kept for reuse.
    var spareHandles: [EasyHandle] = []
    /// The sockets of this client's connections, as curl opens and closes them (corked per pass).
    var sockets: Set<curl_socket_t> = []
    /// This thread's TLS connections that read ahead: bytes they hold are invisible to poll().
    let tls: OpaquePointer? = pushrelay_tls_set_create()
    var limit: Int { max(1, configuration.maxConcurrentStreams * configuration.maxConnectionsPerHost) }

    init(shared: HTTP2Client.Shared, configuration: HTTP2ClientConfiguration) {
        self.shared = shared
        self.configuration = configuration
    }

    private func take() -> (pending: [Transfer], cancelled: [Int], stopping: Bool) {
        shared.state.withLock { state in
            defer {
                state.pending = []
                state.cancelled = []
            }
            return (state.pending, state.cancelled, state.stopping)
        }
    }

    func run() {
        // Named from the thread itself (Foundation's `Thread.name` does not reach the kernel on
        // Linux), so profiles and `top -H` show libcurl's work apart from the Swift pool's.
        pushrelay_name_this_thread(Self.threadName)
        while true {
            let (pending, cancelled, stopping) = take()
            backlog.append(contentsOf: pending)
            for id in cancelled {
                if let transfer = active.removeValue(forKey: id) {
                    end(transfer, .failure(CancellationError()))
                } else if let index = backlog.firstIndex(where: { $0.id == id }) {
                    backlog.remove(at: index).finish(.failure(CancellationError()))
                }
            }
            if stopping {
                for transfer in active.values { end(transfer, .failure(CurlError.clientShutDown)) }
                for transfer in backlog { transfer.finish(.failure(CurlError.clientShutDown)) }
                active.removeAll()
                backlog.removeAll()
                break
            }
            startFromBacklog()
            // One pass: curl writes each stream's frames with its own send(); corked, they leave
            // as full segments when the pass ends instead of one packet per request.
            setCork(true)
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
            // Transfers started here are due at once, so the poll below returns immediately.
            startFromBacklog()
            setCork(false)
            publishReadAheadCount()
            // Records a connection read ahead but curl has not taken (a stream ended mid-buffer)
            // wake nothing: run the next pass at once instead of sleeping on the socket.
            curl_multi_poll(multi, nil, 0, pushrelay_tls_set_pending(tls) != 0 ? 0 : 1000, nil)
        }
        spareHandles.removeAll()
        let waiters = shared.state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.exited = true
            curl_multi_cleanup(multi)
            // The connections are freed, and so out of the set.
            publishReadAheadCount()
            pushrelay_tls_set_free(tls)
            // Requests that raced with the stop.
            for transfer in state.pending { transfer.finish(.failure(CurlError.clientShutDown)) }
            state.pending = []
            defer { state.exitWaiters = [] }
            return state.exitWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func startFromBacklog() {
        guard !backlog.isEmpty, active.count < limit else { return }
        let count = min(backlog.count, limit - active.count)
        let starting = backlog.prefix(count)
        backlog.removeFirst(count)
        for transfer in starting { start(transfer) }
    }

    private func publishReadAheadCount() {
        let count = pushrelay_tls_set_count(tls)
        if shared.readAheadConnections.load(ordering: .relaxed) != count { shared.readAheadConnections.store(count, ordering: .relaxed) }
    }

    private func setCork(_ on: Bool) {
        for socket in sockets { _ = pushrelay_tcp_cork(socket, on ? 1 : 0) }
    }

    private func start(_ transfer: Transfer) {
        guard
            let handle = spareHandles.popLast() ?? EasyHandle(configuration: configuration, loop: Unmanaged.passUnretained(self).toOpaque(), tls: tls)
        else {
            transfer.finish(.failure(CurlError(code: CurlError.setupFailed, message: "curl_easy_init failed")))
            return
        }
        handle.prepare(for: transfer)
        transfer.handle = handle
        let added = curl_multi_add_handle(multi, handle.easy)
        guard added == CURLM_OK else {
            release(handle, from: transfer)
            transfer.finish(.failure(CurlError(code: Int(added.rawValue), message: String(cString: curl_multi_strerror(added)))))
            return
        }
        active[transfer.id] = transfer
    }

    private func complete(_ transfer: Transfer, code: CURLcode) -> Result<HTTP2Response, any Error> {
        guard let handle = transfer.handle else { return .failure(CurlError(code: CurlError.setupFailed, message: "transfer without a handle")) }
        guard code == CURLE_OK else {
            let detail = String(cString: handle.errorBuffer)
            let message = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
            return .failure(CurlError(code: Int(code.rawValue), message: message))
        }
        var status = 0
        pushrelay_curl_easy_getinfo_long(handle.easy, CURLINFO_RESPONSE_CODE, &status)
        var version = 0
        pushrelay_curl_easy_getinfo_long(handle.easy, CURLINFO_HTTP_VERSION, &version)
        return .success(
            HTTP2Response(
                status: status,
                headerBlock: transfer.responseHeaders,
                body: transfer.responseBody,
                httpVersion: version == Int(CURL_HTTP_VERSION_2_0) ? 2 : version == Int(CURL_HTTP_VERSION_1_1) ? 1 : version
            )
        )
    }

    /// Removes the handle from the multi, keeps it for the next request (or frees it here on the
    /// event thread: an easy handle must never be cleaned up on another thread while the multi
    /// runs, it may still be tied to a shared connection), and answers the caller.
    private func end(_ transfer: Transfer, _ result: Result<HTTP2Response, any Error>) {
        if let handle = transfer.handle {
            curl_multi_remove_handle(multi, handle.easy)
            release(handle, from: transfer)
        }
        transfer.finish(result)
    }

    private func release(_ handle: EasyHandle, from transfer: Transfer) {
        handle.detach()
        transfer.handle = nil
        if spareHandles.count < limit { spareHandles.append(handle) }
    }
}
