import Foundation
import TestSupport
import Testing

/// `push-relay` is linked with jemalloc so that jemalloc serves its allocations (Allocator.swift).
@Suite struct AllocatorTests {
    /// `push-relay version`'s allocator line, run with `environment` added to this process's.
    private func allocatorLine(environment: [String: String] = [:]) async throws -> String {
        let run = try await ChildProcess.run(
            try RelayProcess.executable,
            ["version"],
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 }
        )
        #expect(run.status == 0)
        let lines = run.output.split(separator: "\n").map(String.init)
        return try #require(lines.first { $0.hasPrefix("allocator: ") })
    }

    @Test func jemallocServesTheRelaysAllocations() async throws {
        #expect(try await allocatorLine().hasPrefix("allocator: jemalloc 5."))
    }

    /// The check looks at what serves allocations, not at what is linked: with the C library
    /// loaded first, its malloc wins and the line says so.
    @Test func anotherAllocatorInFrontIsReported() async throws {
        let line = try await allocatorLine(environment: ["LD_PRELOAD": "libc.so.6"])
        #expect(line.hasPrefix("allocator: not jemalloc"))
    }
}
