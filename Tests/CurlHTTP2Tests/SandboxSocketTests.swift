import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("The sandbox's accepted sockets")
struct SandboxSocketTests {
    /// The port of a socket address (IPv4 or IPv6), in host order.
    static func port(_ address: sockaddr_storage) -> Int {
        var address = address
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }

    /// This process's socket whose local port is `local` and whose peer's port is `peer`.
    static func socket(local: Int, peer: Int) -> Int32? {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for descriptor in descriptors.compactMap(Int32.init) {
            var own = sockaddr_storage()
            var other = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            var otherLength = length
            let named = withUnsafeMutablePointer(to: &own) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
            }
            let peered = withUnsafeMutablePointer(to: &other) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &otherLength) }
            }
            if named == 0, peered == 0, port(own) == local, port(other) == peer { return descriptor }
        }
        return nil
    }

    static func option(_ descriptor: Int32, level: Int32, name: Int32) -> Int32 {
        var value: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(descriptor, level, name, &value, &length) == 0 ? value : -1
    }

    @Test(
        "an accepted connection has TCP_NODELAY set and SO_DEBUG clear (SO_DEBUG needs CAP_NET_ADMIN: a non-root sandbox closed every connection)"
    )
    func noDelayNotDebug() async throws {
        try await SandboxHarness.with { sandbox in
            let client = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            #expect(client >= 0)
            defer { close(client) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(sandbox.port).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            #expect(connected == 0)
            var own = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            _ = withUnsafeMutablePointer(to: &own) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(client, $0, &length) } }
            let clientPort = Self.port(own)
            // The server's end appears once SwiftNIO has accepted the connection.
            var accepted: Int32?
            for _ in 0..<200 where accepted == nil {
                accepted = Self.socket(local: sandbox.port, peer: clientPort)
                if accepted == nil { try await Task.sleep(for: .milliseconds(10)) }
            }
            let server = try #require(accepted, "the sandbox's end of the connection was not found")
            #expect(Self.option(server, level: Int32(IPPROTO_TCP), name: TCP_NODELAY) == 1)
            #expect(Self.option(server, level: SOL_SOCKET, name: SO_DEBUG) == 0)
        }
    }
}
