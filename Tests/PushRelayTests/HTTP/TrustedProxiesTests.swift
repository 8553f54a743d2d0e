import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Postgres
import TestSupport
import Testing

@testable import PushRelay

@Suite("http.trusted_proxies: addresses and CIDR blocks")
struct TrustedProxiesTests {
    @Test("blocks match what they cover, IPv4 seen as IPv6 included; bad entries are refused")
    func matching() throws {
        let proxies = try TrustedProxies(["10.1.0.0/16", "192.0.2.7", "fd00::/8", " 203.0.113.128/25 "])
        let inside = ["10.1.255.3", "192.0.2.7", "fd12::1", "::ffff:10.1.0.1", "203.0.113.200"]
        let outside = ["10.2.0.1", "192.0.2.8", "fe80::1", "::ffff:10.2.0.1", "203.0.113.127", "127.0.0.1"]
        for address in inside { #expect(proxies.contains(try SocketAddress(ipAddress: address, port: 1)), "\(address)") }
        for address in outside { #expect(!proxies.contains(try SocketAddress(ipAddress: address, port: 1)), "\(address)") }
        #expect(!proxies.contains(nil))
        #expect(!TrustedProxies.none.contains(try SocketAddress(ipAddress: "127.0.0.1", port: 1)))
        #expect(try TrustedProxies(["0.0.0.0/0"]).contains(try SocketAddress(ipAddress: "198.51.100.1", port: 1)))
        for bad in ["localhost", "10.0.0.0/33", "10.0.0.0/", "::1/129", "10.0.0.1/x", ""] {
            #expect(throws: (any Error).self, "\(bad)") { try TrustedProxies([bad]) }
        }
    }
}
