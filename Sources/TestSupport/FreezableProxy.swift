import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy on 127.0.0.1 in front of a server, for tests of a server that stops answering
/// without closing its connections: a host that crashed or was cut off by a partition.
///
/// While ``freeze()`` holds, it forwards nothing in either direction and accepts no connection,
/// but closes none: the kernel still acknowledges what clients send until its buffers fill, so
/// neither TCP keepalives nor `tcp_user_timeout` see anything wrong. ``thaw()`` forwards again,
/// on the old connections and new ones.
public final class FreezableProxy: Sendable {
    /// The port clients connect to.
    public let port: Int
    private let targetPort: Int
    private let listener: Int32
    private let frozen = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)

    /// Starts forwarding `127.0.0.1:<port>` to `127.0.0.1:targetPort`; `port` is `listenPort`,
    /// or a free one when it is 0.
    public init(targetPort: Int, listenPort: Int = 0) throws {
        self.targetPort = targetPort
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw ProxyError(message: "socket: \(errno)") }
        var yes: Int32 = 1
        setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: listenPort)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(socket, 128) == 0 else {
            close(socket)
            throw ProxyError(message: "bind/listen: \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        listener = socket
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "test-proxy-accept"
        thread.start()
    }

    /// Stops forwarding without closing anything.
    public func freeze() { frozen.store(true, ordering: .releasing) }

    /// Forwards again.
    public func thaw() { frozen.store(false, ordering: .releasing) }

    /// Closes the listener and every forwarded connection, within 50 ms. Only the threads that own
    /// the descriptors close them: a descriptor closed by one and then shut down by another may
    /// already be another connection's (another test's, in the same process).
    public func stop() {
        stopped.store(true, ordering: .releasing)
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    private func acceptLoop() {
        while !stopped.load(ordering: .acquiring) {
            if frozen.load(ordering: .acquiring) {
                usleep(20_000)
                continue
            }
            var descriptor = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 50) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            let server = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: targetPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                close(client)
                close(server)
                continue
            }
            let thread = Thread { [self] in pump(client, server) }
            thread.name = "test-proxy-pump"
            thread.start()
        }
        close(listener)
    }

    /// Copies both ways until either side closes or the proxy stops; copies nothing while frozen.
    private func pump(_ a: Int32, _ b: Int32) {
        defer {
            close(a)
            close(b)
        }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while !stopped.load(ordering: .acquiring) {
            if frozen.load(ordering: .acquiring) {
                usleep(20_000)
                continue
            }
            var descriptors = [pollfd(fd: a, events: Int16(POLLIN), revents: 0), pollfd(fd: b, events: Int16(POLLIN), revents: 0)]
            guard poll(&descriptors, 2, 50) > 0 else { continue }
            for (from, to) in [(0, 1), (1, 0)] where descriptors[from].revents != 0 {
                // Re-check: a freeze that began during poll must not let these bytes through.
                if frozen.load(ordering: .acquiring) { break }
                let count = read(descriptors[from].fd, &buffer, buffer.count)
                if count <= 0 { return }
                var sent = 0
                while sent < count {
                    let written = buffer.withUnsafeBytes { write(descriptors[to].fd, $0.baseAddress! + sent, count - sent) }
                    if written <= 0 { return }
                    sent += written
                }
            }
        }
    }

    struct ProxyError: Error, CustomStringConvertible {
        var message: String
        var description: String { "FreezableProxy: \(message)" }
    }
}
