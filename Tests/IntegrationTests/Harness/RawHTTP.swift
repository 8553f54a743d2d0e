import Foundation
import NIOCore
import NIOPosix
import TestSupport

/// An HTTP/1.1 client that sends bytes exactly as given (odd paths, chunked bodies, broken
/// framing) and reads the answer until the server closes: what a hostile client sends is not what
/// URLSession or a test client would let through.
enum RawHTTP {
    struct Answer: Sendable {
        var status: Int
        var headers: [(name: String, value: String)]
        var body: [UInt8]

        func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    static let group = MultiThreadedEventLoopGroup.singleton
    /// ``hangCeiling`` for NIO: a connection or an answer that takes longer is hung, not slow.
    static let hangTimeout = TimeAmount.seconds(hangCeiling.components.seconds)

    /// Builds a request with `Connection: close` and, unless `chunks` is given, a `Content-Length`.
    static func request(
        _ method: String,
        _ target: String,
        headers: [(String, String)] = [],
        body: [UInt8]? = nil,
        chunks: [[UInt8]]? = nil
    ) -> [UInt8] {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        var bytes: [UInt8] = []
        if let chunks {
            head += "Transfer-Encoding: chunked\r\n\r\n"
            bytes = Array(head.utf8)
            for chunk in chunks where !chunk.isEmpty {
                bytes += Array(String(chunk.count, radix: 16).utf8) + [13, 10] + chunk + [13, 10]
            }
            bytes += Array("0\r\n\r\n".utf8)
        } else {
            if let body { head += "Content-Length: \(body.count)\r\n" }
            bytes = Array((head + "\r\n").utf8) + (body ?? [])
        }
        return bytes
    }

    /// Sends `bytes` on a new connection and returns the answer, or `nil` when the server closed
    /// the connection without one. Gives up after `timeout` (by default when the work is hung).
    static func send(port: Int, _ bytes: [UInt8], timeout: TimeAmount = RawHTTP.hangTimeout) async throws -> Answer? {
        let collector = Collector()
        let channel = try await ClientBootstrap(group: group)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .connectTimeout(RawHTTP.hangTimeout)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(collector) } }
            .connect(host: "127.0.0.1", port: port).get()
        // The server may answer and close before it has read everything (a 413): ignore write errors.
        try? await channel.writeAndFlush(ByteBuffer(bytes: bytes)).get()
        let timer = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        try? await channel.closeFuture.get()
        timer.cancel()
        return parse(try await collector.received.futureResult.get())
    }

    static func parse(_ raw: [UInt8]) -> Answer? {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = raw.firstRange(of: separator) else { return nil }
        let head = String(decoding: raw[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = head.first?.split(separator: " ") ?? []
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { return nil }
        let headers = head.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var body = Array(raw[end.upperBound...])
        if headers.contains(where: { $0.0.lowercased() == "transfer-encoding" && $0.1.lowercased() == "chunked" }) {
            body = dechunk(body)
        }
        return Answer(status: status, headers: headers, body: body)
    }

    static func dechunk(_ bytes: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        var index = 0
        while index < bytes.count {
            guard let lineEnd = bytes[index...].firstRange(of: [13, 10]) else { break }
            let sizeText = String(decoding: bytes[index..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size > 0 else { break }
            let start = lineEnd.upperBound
            guard start + size <= bytes.count else { break }
            result += bytes[start..<(start + size)]
            index = start + size + 2
        }
        return result
    }

    private final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        var bytes: [UInt8] = []
        var received: EventLoopPromise<[UInt8]>!

        func handlerAdded(context: ChannelHandlerContext) {
            received = context.eventLoop.makePromise()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            bytes += Array(unwrapInboundIn(data).readableBytesView)
        }

        func channelInactive(context: ChannelHandlerContext) {
            received.succeed(bytes)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}

/// A keep-alive HTTP/1.1 connection driven byte by byte: requests go out exactly as given (one
/// write may hold several, pipelined), answers are read one at a time, framed by `Content-Length`.
struct RawConnection {
    private var inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator
    private let outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>
    private var pending: [UInt8] = []
    /// The connection's own port.
    let localPort: Int?

    /// Opens a connection to `port`, runs `body` with it and closes it. The connection is closed
    /// after `timeout` whatever happens, so a missing answer fails the test instead of hanging it.
    static func with<T: Sendable>(
        port: Int,
        timeout: TimeAmount = RawHTTP.hangTimeout,
        _ body: (inout RawConnection) async throws -> T
    ) async throws -> T {
        let channel = try await ClientBootstrap(group: RawHTTP.group)
            .connectTimeout(RawHTTP.hangTimeout)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var connection = RawConnection(inbound: inbound.makeAsyncIterator(), outbound: outbound, localPort: channel.channel.localAddress?.port)
            return try await body(&connection)
        }
    }

    private init(
        inbound: NIOAsyncChannelInboundStream<ByteBuffer>.AsyncIterator,
        outbound: NIOAsyncChannelOutboundWriter<ByteBuffer>,
        localPort: Int?
    ) {
        self.inbound = inbound
        self.outbound = outbound
        self.localPort = localPort
    }

    /// A request without `Connection: close` (unless given in `headers`).
    static func request(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8]? = nil) -> [UInt8] {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        return Array((head + "\r\n").utf8) + (body ?? [])
    }

    mutating func send(_ bytes: [UInt8]) async throws {
        try await outbound.write(ByteBuffer(bytes: bytes))
    }

    /// The next answer; `nil` when the connection closed first.
    mutating func next() async throws -> RawHTTP.Answer? {
        while true {
            if let (answer, used) = Self.complete(pending) {
                pending.removeFirst(used)
                return answer
            }
            guard let buffer = try await inbound.next() else { return nil }
            pending += Array(buffer.readableBytesView)
        }
    }

    /// Reads raw bytes (a stream's chunks, undecoded) until the text read so far, from where the
    /// last call stopped, satisfies `done`; returns that text. `nil` when the connection closed first.
    @discardableResult
    mutating func read(until done: (String) -> Bool) async throws -> String? {
        while true {
            let text = String(decoding: pending, as: UTF8.self)
            if done(text) {
                pending.removeAll()
                return text
            }
            guard let buffer = try await inbound.next() else { return nil }
            pending += Array(buffer.readableBytesView)
        }
    }

    /// The first answer in `bytes` and how many bytes it took, once it is all there.
    static func complete(_ bytes: [UInt8]) -> (RawHTTP.Answer, Int)? {
        guard let end = bytes.firstRange(of: [13, 10, 13, 10]), var answer = RawHTTP.parse(Array(bytes[..<end.upperBound])) else { return nil }
        let length = answer.header("Content-Length").flatMap { Int($0) } ?? 0
        guard bytes.count >= end.upperBound + length else { return nil }
        answer.body = Array(bytes[end.upperBound..<(end.upperBound + length)])
        return (answer, end.upperBound + length)
    }
}
