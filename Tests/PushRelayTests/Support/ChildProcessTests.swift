import Foundation
import TestSupport
import Testing

@Suite("ChildProcess, the processes tests start")
struct ChildProcessTests {
    @Test("waiting for children holds no thread: with more children waited for than the pool has threads, the test's task still runs")
    func waitsHoldNoThread() async throws {
        let directory = (NSTemporaryDirectory() as NSString).appendingPathComponent("child-gate-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let gate = directory + "/gate"
        let count = ProcessInfo.processInfo.activeProcessorCount + 2
        // Each child says it started, then waits for the gate, which only this test's task opens once
        // every child has started. A wait that held a thread of the concurrency pool (one per core)
        // would leave no thread for that task; `timeout` then ends the children (status 124).
        let script = "touch \(directory)/started-$$; while [ ! -e \(gate) ]; do sleep 0.05; done"
        let seconds = String(hangCeiling.components.seconds)
        try await withThrowingTaskGroup(of: Int32.self) { group in
            for _ in 0..<count {
                group.addTask { try await ChildProcess.run("/usr/bin/timeout", [seconds, "/bin/sh", "-c", script]).status }
            }
            let started = await eventually {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
                return names.filter { $0.hasPrefix("started-") }.count == count
            }
            #expect(started)
            #expect(FileManager.default.createFile(atPath: gate, contents: nil))
            for try await status in group { #expect(status == 0) }
        }
    }
}
