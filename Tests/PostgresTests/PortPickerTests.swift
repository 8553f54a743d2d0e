import Foundation
import Testing

@testable import Postgres

/// The ports servers started by the relay or its tests listen on: never one the kernel may give an
/// outgoing connection in the meantime, never one handed out twice.
@Suite("Listening ports outside the ephemeral range")
struct PortPickerTests {
    @Test("freePort is below the kernel's ephemeral range, bindable, and never the same twice in a process")
    func freePortAvoidsEphemeralRange() throws {
        let text = try String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
        let ephemeral = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        try #require(ephemeral.count == 2)
        let ports = try (0..<200).map { _ in try EmbeddedPostgres.freePort() }
        #expect(Set(ports).count == ports.count)
        let inside = ports.filter { (ephemeral[0]...ephemeral[1]).contains($0) }
        #expect(inside.isEmpty, "ports in the ephemeral range \(ephemeral): \(inside)")
    }

    @Test("the range: below the ephemeral ports, above them when they start low, the default when unreadable")
    func listeningRange() {
        #expect(PortPicker.listeningRange(ephemeral: "32768\t60999\n") == 10000...32767)
        #expect(PortPicker.listeningRange(ephemeral: "1024 60999") == 61000...65535)
        #expect(PortPicker.listeningRange(ephemeral: "1024 65535") == 10000...32767)
        #expect(PortPicker.listeningRange(ephemeral: nil) == 10000...32767)
        #expect(PortPicker.listeningRange(ephemeral: "garbage") == 10000...32767)
    }

    @Test("a port that is not free is skipped; the walk wraps round the range and fails when every port is taken")
    func skipsTakenPorts() throws {
        let picker = PortPicker(range: 20000...20003)
        var taken: Set<Int> = [20001, 20002]
        let first = try picker.next { !taken.contains($0) }
        let second = try picker.next { !taken.contains($0) }
        #expect(Set([first, second]) == [20000, 20003])
        taken = []
        let third = try picker.next { !taken.contains($0) }
        #expect([20001, 20002].contains(third))
        _ = try picker.next { _ in true }
        #expect(throws: PostgresError.self) { try picker.next { _ in true } }
    }
}
