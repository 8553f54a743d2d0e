import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A process a test starts (a relay, the sandbox, a tool), without Foundation's `Process`:
/// spawned with `posix_spawn` in a process group of its own, with default signal handling, and
/// reaped with `waitpid` by this type alone (`Process.waitUntilExit` was seen spinning forever on a
/// child that had exited, and races with Foundation's own reaping). Waits for its exit are bounded
/// by the hang ceiling, after which it is killed. A child left running by a crashed test process
/// is killed by `scripts/test/reap.py`, the batch's subreaper, which also fails the batch.
public final class ChildProcess: Sendable {
    public let processIdentifier: pid_t
    /// The raw wait status, once reaped.
    private let reaped = Mutex<Int32?>(nil)

    /// Starts `executable` with `arguments`.
    /// - Parameters:
    ///   - environment: the whole environment; `nil`: this process's.
    ///   - output: a file standard output is appended to (created if missing); `nil`: /dev/null.
    ///   - error: a file standard error is appended to; `nil`: the same as `output`.
    ///   - inheritsError: standard error is this process's (`error` is then ignored).
    ///   - directory: the working directory (through `env -C`); `nil`: this process's.
    public init(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String]? = nil,
        output: String? = nil,
        error: String? = nil,
        inheritsError: Bool = false,
        directory: String? = nil
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        if inheritsError {
            // fd 2 stays as it is.
        } else if let error {
            posix_spawn_file_actions_addopen(&actions, 2, error, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var everySignal = sigset_t()
        sigfillset(&everySignal)
        var noSignal = sigset_t()
        sigemptyset(&noSignal)
        posix_spawnattr_setsigdefault(&attributes, &everySignal)
        posix_spawnattr_setsigmask(&attributes, &noSignal)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))

        let command = directory.map { ["/usr/bin/env", "-C", $0, executable] } ?? [executable]
        let argv = (command + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for pointer in envp ?? [] { free(pointer) } }
        var pid: pid_t = 0
        let result =
            if let envp {
                posix_spawn(&pid, command[0], &actions, &attributes, argv, envp)
            } else {
                posix_spawn(&pid, command[0], &actions, &attributes, argv, environ)
            }
        guard result == 0 else { throw SpawnError(executable: executable, code: result) }
        processIdentifier = pid
    }

    public struct SpawnError: Error, CustomStringConvertible {
        public let executable: String
        public let code: Int32
        public var description: String { "cannot start \(executable): \(String(cString: strerror(code)))" }
    }

    /// Whether it has not exited yet (reaping it if it has).
    public var isRunning: Bool { reap(blocking: false) == nil }

    /// Its exit status, or 128 + the signal that ended it; `nil` while it runs.
    public var terminationStatus: Int32? {
        reap(blocking: false).map { status in
            let signal = status & 0x7f
            return signal == 0 ? (status >> 8) & 0xff : 128 + signal
        }
    }

    /// Sends `signal` to it (nothing once it is reaped).
    public func signal(_ signal: Int32) {
        reaped.withLock { status in
            if status == nil { _ = sendSignal(processIdentifier, signal) }
        }
    }

    public func interrupt() { signal(SIGINT) }
    public func terminate() { signal(SIGTERM) }
    public func kill() { signal(SIGKILL) }

    /// Waits until it exits, up to the hang ceiling; then kills it (and records why). Returns
    /// ``terminationStatus``.
    ///
    /// The wait sleeps as a task, holding no thread: the concurrency pool has one thread per core,
    /// and a child waited for on one of them stalls every other task of the test process (an
    /// in-process relay's, another test's) for the child's whole life, which a loaded machine
    /// stretches to many seconds.
    @discardableResult
    public func waitUntilExit() async -> Int32 {
        let deadline = ContinuousClock.now + hangCeiling
        while isRunning && ContinuousClock.now < deadline {
            // A cancelled task's sleep returns at once: the wait then blocks briefly instead of spinning.
            if (try? await Task.sleep(for: .milliseconds(10))) == nil { usleep(10_000) }
        }
        return endHung()
    }

    /// Waits, as ``eventually(ceiling:_:)`` does, until `condition` holds; false as soon as this
    /// process has exited instead (a server that failed to start), not at the hang ceiling.
    public func eventuallyWhileRunning(_ condition: () async throws -> Bool) async rethrows -> Bool {
        var exited = false
        let met = try await eventually {
            guard isRunning else {
                exited = true
                return true
            }
            return try await condition()
        }
        return met && !exited
    }

    /// ``waitUntilExit()`` holding the calling thread, for where nothing can be awaited (a `defer`):
    /// a child asked to stop there exits within moments.
    @discardableResult
    public func waitUntilExit() -> Int32 {
        let deadline = ContinuousClock.now + hangCeiling
        while isRunning && ContinuousClock.now < deadline { usleep(10_000) }
        return endHung()
    }

    /// After a wait that reached the hang ceiling: kills the child if it still runs (and says so),
    /// and returns ``terminationStatus``.
    private func endHung() -> Int32 {
        if isRunning {
            print("ChildProcess: pid \(processIdentifier) still running after \(hangCeiling); killing it")
            kill()
            _ = reap(blocking: true)
        }
        return terminationStatus ?? -1
    }

    /// Runs `executable` to its end and returns its status and what it wrote (each stream to a
    /// file of its own meanwhile).
    public static func run(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String]? = nil,
        directory: String? = nil
    ) async throws -> (status: Int32, output: String, error: String) {
        let base = (NSTemporaryDirectory() as NSString).appendingPathComponent("child-\(UUID().uuidString.prefix(8))")
        defer {
            unlink(base + ".out")
            unlink(base + ".err")
        }
        let child = try ChildProcess(
            executable,
            arguments,
            environment: environment,
            output: base + ".out",
            error: base + ".err",
            directory: directory
        )
        let status = await child.waitUntilExit()
        let read = { (path: String) in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        return (status, read(base + ".out"), read(base + ".err"))
    }

    private func reap(blocking: Bool) -> Int32? {
        reaped.withLock { reaped in
            if let reaped { return reaped }
            var status: Int32 = 0
            while true {
                let result = waitpid(processIdentifier, &status, blocking ? 0 : WNOHANG)
                if result == processIdentifier {
                    reaped = status
                    return status
                }
                if result == -1 && errno == EINTR { continue }
                return nil
            }
        }
    }
}

/// `kill(2)`, out of reach of ``ChildProcess/kill()``'s name.
private func sendSignal(_ pid: pid_t, _ signal: Int32) -> Int32 { kill(pid, signal) }
