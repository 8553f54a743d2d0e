import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import ServiceLifecycle
import Synchronization

/// A request as the sandbox's endpoints see it.
struct SandboxHTTPRequest: Sendable {
    var method: String
    var path: String
    var query: [String: String]
    /// Lower-cased names.
    var headers: [String: String]
    var body: Data
    /// For a request without an `authorization` header on a connection whose client presented an
    /// APNs certificate of the sandbox's CA: the topic that certificate is for.
    var clientCertificateTopic: String? = nil
    /// The TCP connection the request came on, numbered from 1 in the order they were accepted.
    var connection: Int = 0
}

/// An answer from an endpoint; `dropConnection` closes the TCP connection instead.
struct SandboxHTTPResponse: Sendable {
    var status: Int
    var headers: [(String, String)] = []
    var body: Data = Data()
    var dropConnection = false
}

/// The sandbox's HTTP/2 + TLS server, on SwiftNIO directly.
///
/// Not on Hummingbird, whose HTTP/2 set-up keeps SwiftNIO's default DoS guards: libcurl 7.88
/// resets many streams it has just finished and ends POSTs with empty DATA frames, and those guards
/// answer with GOAWAY ENHANCE_YOUR_CALM on a busy multiplexed connection. APNs accepts such
/// clients, so the sandbox must too.
public final class SandboxServer: Sendable {
    /// The bound port.
    public let port: Int
    /// The CA certificate clients should trust.
    public let certificates: SandboxCertificates
    /// What the sandbox received and how it behaves.
    public let state: SandboxState
    private let channel: any Channel

    private init(port: Int, certificates: SandboxCertificates, state: SandboxState, channel: any Channel) {
        self.port = port
        self.certificates = certificates
        self.state = state
        self.channel = channel
    }

    /// Generates the certificates, binds and starts serving.
    public static func start(configuration: SandboxConfiguration, state: SandboxState = SandboxState(), logger: Logger) async throws -> SandboxServer
    {
        let certificates =
            configuration.keepsCertificateAuthority
            ? try SandboxCertificates.open(directory: configuration.directory)
            : try SandboxCertificates.generate(directory: configuration.directory)
        var tls = try certificates.serverTLSConfiguration()
        tls.applicationProtocols = configuration.http1Only ? ["http/1.1"] : ["h2"]
        let sslContext = try NIOSSLContext(configuration: tls)
        let router = try await SandboxRouter(configuration: configuration, state: state)
        let connection = {
            var connection = NIOHTTP2Handler.ConnectionConfiguration()
            connection.maximumSequentialEmptyDataFrames = 1_000
            connection.maximumConnectionGlitches = 100_000
            connection.maximumRecentlyResetStreams = 10_000
            // APNs allows about a thousand streams per connection.
            connection.initialSettings = [
                HTTP2Setting(parameter: .maxConcurrentStreams, value: 1000),
                HTTP2Setting(parameter: .maxHeaderListSize, value: 16_384),
            ]
            return connection
        }()
        // libcurl 7.88 often resets a stream it has just finished (RST_STREAM after END_STREAM);
        // SwiftNIO's rapid-reset guard (200 per 30 s) would then close busy connections.
        let streams = {
            var streams = NIOHTTP2Handler.StreamConfiguration()
            streams.streamResetFrameRateLimit.maximumCount = 1_000_000
            return streams
        }()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let tls = NIOSSLServerHandler(context: sslContext)
                    try channel.pipeline.syncOperations.addHandler(tls)
                    try channel.pipeline.syncOperations.addHandler(FlushCoalescer())
                    let peer = NIOLoopBound(ClientIdentity(tls: tls), eventLoop: channel.eventLoop)
                    if configuration.http1Only {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                        try channel.pipeline.syncOperations.addHandler(SandboxStreamHandler(router: router, client: peer, version: .http1_1))
                        return
                    }
                    let multiplexer = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                        mode: .server,
                        connectionConfiguration: connection,
                        streamConfiguration: streams
                    ) { stream in
                        stream.eventLoop.makeCompletedFuture {
                            try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                            try stream.pipeline.syncOperations.addHandler(SandboxStreamHandler(router: router, client: peer))
                        }
                    }
                    _ = multiplexer
                    try channel.pipeline.syncOperations.addHandler(ConnectionErrorLogger(logger: logger))
                }
            }
            .bind(host: configuration.host, port: configuration.port)
            .get()
        let port = channel.localAddress?.port ?? configuration.port
        logger.info("sandbox listening", metadata: ["sandbox.port": "\(port)", "sandbox.ca_file": "\(certificates.caFile)"])
        return SandboxServer(port: port, certificates: certificates, state: state, channel: channel)
    }

    /// Stops accepting connections and closes the listener.
    public func shutdown() async {
        try? await channel.close()
    }
}

/// Runs a ``SandboxServer`` until graceful shutdown.
public struct SandboxService: Service {
    let configuration: SandboxConfiguration
    let state: SandboxState
    let logger: Logger
    let onStart: @Sendable (SandboxServer) async throws -> Void

    /// - Parameter onStart: runs once the server listens; an error it throws stops the server and
    ///   ends ``run()`` with it.
    public init(
        configuration: SandboxConfiguration,
        state: SandboxState = SandboxState(),
        logger: Logger,
        onStart: @escaping @Sendable (SandboxServer) async throws -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.state = state
        self.logger = logger
        self.onStart = onStart
    }

    public func run() async throws {
        let server = try await SandboxServer.start(configuration: configuration, state: state, logger: logger)
        do {
            try await onStart(server)
        } catch {
            await server.shutdown()
            throw error
        }
        try? await gracefulShutdown()
        await server.shutdown()
    }
}

/// Collects one HTTP/2 stream's request (or an HTTP/1.1 connection's requests, one at a time)
/// and writes the router's answer.
final class SandboxStreamHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let router: SandboxRouter
    /// The connection's client certificate, if any.
    private let client: NIOLoopBound<ClientIdentity>
    private let pending = Mutex<(head: HTTPRequestHead?, body: ByteBuffer)>((nil, ByteBuffer()))
    private let version: HTTPVersion

    init(router: SandboxRouter, client: NIOLoopBound<ClientIdentity>, version: HTTPVersion = .http2) {
        self.router = router
        self.client = client
        self.version = version
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            pending.withLock { $0 = (head, ByteBuffer()) }
        case .body(var chunk):
            _ = pending.withLock { $0.body.writeBuffer(&chunk) }
        case .end:
            let (head, body) = pending.withLock { $0 }
            guard let head else { return }
            let (path, query) = Self.split(uri: head.uri)
            var headers: [String: String] = [:]
            for (name, value) in head.headers { headers[name.lowercased()] = value }
            let request = SandboxHTTPRequest(
                method: head.method.rawValue,
                path: path,
                query: query,
                headers: headers,
                body: Data(body.readableBytesView),
                clientCertificateTopic: headers["authorization"] == nil ? client.value.apnsTopic : nil,
                connection: client.value.connection
            )
            let router = self.router
            let promise = context.eventLoop.makePromise(of: SandboxHTTPResponse.self)
            promise.completeWithTask { await router.respond(request) }
            let bound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
            promise.futureResult.whenSuccess { response in
                let (context, handler) = bound.value
                handler.write(response, context: context)
            }
        }
    }

    /// A request target's path (percent-decoded) and query items.
    static func split(uri: String) -> (path: String, query: [String: String]) {
        func decoded(_ text: Substring) -> String { text.contains("%") ? (text.removingPercentEncoding ?? String(text)) : String(text) }
        guard let mark = uri.firstIndex(of: "?") else { return (decoded(uri[...]), [:]) }
        var query: [String: String] = [:]
        for item in uri[uri.index(after: mark)...].split(separator: "&") {
            let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            query[decoded(parts[0])] = parts.count > 1 ? decoded(parts[1]) : ""
        }
        return (decoded(uri[..<mark]), query)
    }

    private func write(_ response: SandboxHTTPResponse, context: ChannelHandlerContext) {
        if response.dropConnection {
            (context.channel.parent ?? context.channel).close(promise: nil)
            return
        }
        var headers = HTTPHeaders(response.headers)
        headers.replaceOrAdd(name: "content-length", value: String(response.body.count))
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: version, status: .init(statusCode: response.status), headers: headers))),
            promise: nil
        )
        if !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: response.body)))), promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

/// The APNs topic of the certificate a connection's client presented, read from the TLS handler
/// once, after the handshake (streams only exist after it).
final class ClientIdentity {
    private static let accepted = Atomic<Int>(0)

    private let tls: NIOSSLServerHandler
    private var topic: String??
    /// This connection's number (``SandboxHTTPRequest/connection``).
    let connection: Int

    init(tls: NIOSSLServerHandler) {
        self.tls = tls
        connection = Self.accepted.add(1, ordering: .relaxed).newValue
    }

    var apnsTopic: String? {
        if let topic { return topic }
        let found = tls.peerCertificate.flatMap(SandboxCertificates.apnsTopic(of:))
        topic = .some(found)
        return found
    }
}

/// Turns the flushes of one event-loop tick into one: every answered stream flushes, and without
/// this each answer would leave in a TLS record and a write of its own.
final class FlushCoalescer: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = Any
    private var scheduled = false

    func flush(context: ChannelHandlerContext) {
        guard !scheduled else { return }
        scheduled = true
        let bound = NIOLoopBound((context, self), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (context, handler) = bound.value
            handler.scheduled = false
            context.flush()
        }
    }
}

/// Logs connection-level errors (protocol violations, DoS guards) so a GOAWAY can be explained.
final class ConnectionErrorLogger: ChannelInboundHandler, Sendable {
    typealias InboundIn = Any
    let logger: Logger
    init(logger: Logger) { self.logger = logger }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("sandbox connection error", metadata: ["error": "\(error)"])
        context.fireErrorCaught(error)
    }
}
