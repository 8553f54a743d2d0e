import Foundation
import Glibc
import Logging
import ServiceLifecycle
import Synchronization

/// The way `push-relay reload --pid PID` asks a running relay to reload its configuration and
/// hears the answer (the packaged units' `ExecReload=`), where SIGHUP cannot answer.
///
/// `serve` listens on an abstract Unix socket named after its PID namespace and process ID,
/// `push-relay/<pid namespace inode>/<pid>/control`: nothing on disk to create, clean up or share
/// between instances, and the unit's sandbox allows it (`RestrictAddressFamilies=` has AF_UNIX).
/// Abstract names are per network namespace; the PID namespace in the name keeps apart two relays
/// that share one but not their process IDs (containers on the host's network, both PID 1). The
/// kernel says who connects (`SO_PEERCRED`); only the relay's own user and root are answered. One request a connection, one at a time: the
/// client writes `reload` and a newline, the relay reloads as on SIGHUP and writes one JSON line,
/// ``Answer``, then closes.
public enum ControlSocket {
    /// The socket's name for the relay with process ID `pid` in this process's PID namespace.
    public static func name(pid: Int32) -> String { "push-relay/\(pidNamespace)/\(pid)/control" }

    /// This process's PID namespace: the inode number in `/proc/self/ns/pid` (`pid:[4026531836]`),
    /// or `-` where it cannot be read.
    static let pidNamespace: String = {
        guard let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid") else {
            return "-"
        }
        let digits = link.filter(\.isNumber)
        return digits.isEmpty ? "-" : digits
    }()

    /// The one request there is.
    public static let reloadRequest = "reload\n"

    /// What a request to reload answers.
    public struct Answer: Codable, Sendable, Equatable {
        /// `reloaded`, or `refused` (the configuration in use is unchanged).
        public var status: String
        /// Why the file was refused; `nil` when reloaded.
        public var reason: String?
        /// What the reload did; `nil` when refused.
        public var outcome: ConfigurationReloader.Outcome?

        public init(status: String, reason: String? = nil, outcome: ConfigurationReloader.Outcome? = nil) {
            self.status = status
            self.reason = reason
            self.outcome = outcome
        }
    }

    /// A new stream socket that `attach` (`bind` or `connect`) gave the control socket name of
    /// `pid`; -1, with `errno` set, when either failed.
    static func socket(forPID pid: Int32, _ attach: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        let socket = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { return -1 }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        // An abstract name: a NUL, then the name, not NUL-terminated; the length says where it ends.
        let bytes = [UInt8(0)] + Array(name(pid: pid).utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { path in
            path.copyBytes(from: bytes.prefix(path.count))
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        let attached = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { attach(socket, $0, length) }
        }
        guard attached == 0 else {
            let error = errno
            close(socket)
            errno = error
            return -1
        }
        return socket
    }

    /// Connects to the relay with process ID `pid`, asks it to reload and returns its answer.
    /// Throws ``Unreachable`` when there is no such relay or it does not answer within `timeout`
    /// seconds.
    public static func requestReload(pid: Int32, timeout: Int = 120) throws -> Answer {
        let socket = Self.socket(forPID: pid, connect)
        guard socket >= 0 else {
            let reason = errno == ECONNREFUSED ? "nothing listens on its control socket" : errorText()
            if kill(pid, 0) != 0 && errno == ESRCH { throw Unreachable(description: "no process has ID \(pid)") }
            throw Unreachable(description: "process \(pid) is not a push-relay serve of this version (\(reason))")
        }
        defer { close(socket) }
        setTimeout(socket, seconds: timeout)
        guard writeAll(socket, Array(reloadRequest.utf8)) else {
            throw Unreachable(description: "cannot write to process \(pid)'s control socket: \(errorText())")
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while answer.count < 1 << 20 {
            let count = read(socket, &buffer, buffer.count)
            if count > 0 {
                answer += buffer[..<count]
            } else if count == 0 || errno != EINTR {
                break
            }
        }
        guard let line = answer.split(separator: UInt8(ascii: "\n")).first,
            let decoded = try? JSONDecoder().decode(Answer.self, from: Data(line))
        else {
            throw Unreachable(
                description:
                    "process \(pid) closed its control socket without an answer, or gave none within \(timeout) s"
            )
        }
        return decoded
    }

    /// The relay could not be asked, or did not answer.
    public struct Unreachable: Error, CustomStringConvertible {
        public var description: String
    }

    static func errorText() -> String { String(cString: strerror(errno)) }

    static func setTimeout(_ socket: Int32, seconds: Int) {
        var time = timeval(tv_sec: seconds, tv_usec: 0)
        for option in [SO_RCVTIMEO, SO_SNDTIMEO] {
            _ = setsockopt(socket, SOL_SOCKET, option, &time, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    static func writeAll(_ socket: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { write(socket, $0.baseAddress, $0.count) }
            if count > 0 {
                sent += count
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                return false
            }
        }
        return true
    }
}

/// Serves ``ControlSocket`` for `serve`: a thread of its own accepts and answers, one connection
/// at a time (a reload is rare, and reloads are serialised by the reloader anyway).
struct ControlSocketService: Service {
    let reloader: ConfigurationReloader
    let logger: Logger

    func run() async throws {
        let listener = ControlSocket.socket(forPID: getpid()) { bind($0, $1, $2) == 0 ? listen($0, 8) : -1 }
        guard listener >= 0 else {
            logger.warning(
                "no control socket: push-relay reload cannot reach this relay",
                metadata: ["error": "\(ControlSocket.errorText())"]
            )
            return
        }
        let (reloader, logger) = (reloader, logger)
        let stopped = DispatchSemaphore(value: 0)
        let thread = Thread {
            Self.serve(listener, reloader: reloader, logger: logger)
            stopped.signal()
        }
        thread.name = "push-relay control"
        thread.start()
        try? await gracefulShutdown()
        // Wakes accept(), which then fails, and the thread ends.
        shutdown(listener, Int32(SHUT_RDWR))
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                stopped.wait()
                done.resume()
            }
        }
        close(listener)
    }

    /// Accepts until the listener is shut down.
    private static func serve(_ listener: Int32, reloader: ConfigurationReloader, logger: Logger) {
        while true {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            answer(connection, reloader: reloader, logger: logger)
            close(connection)
        }
    }

    private static func answer(_ connection: Int32, reloader: ConfigurationReloader, logger: Logger) {
        // struct ucred (pid, uid, gid), which Glibc's module leaves out without _GNU_SOURCE.
        var credentials = PeerCredentials(pid: 0, uid: 0, gid: 0)
        var size = socklen_t(MemoryLayout<PeerCredentials>.size)
        guard getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &credentials, &size) == 0 else { return }
        guard credentials.uid == 0 || credentials.uid == geteuid() else {
            logger.warning(
                "control socket: a request from another user was refused",
                metadata: ["peer.uid": "\(credentials.uid)", "peer.pid": "\(credentials.pid)"]
            )
            return
        }
        ControlSocket.setTimeout(connection, seconds: 5)
        var request: [UInt8] = []
        var byte: UInt8 = 0
        while request.count < 64, read(connection, &byte, 1) == 1, byte != UInt8(ascii: "\n") { request.append(byte) }
        guard String(decoding: request, as: UTF8.self) + "\n" == ControlSocket.reloadRequest else { return }
        let answer = Self.reload(reloader, trigger: "push-relay reload (pid \(credentials.pid))")
        guard var line = try? JSONEncoder().encode(answer) else { return }
        line.append(UInt8(ascii: "\n"))
        _ = ControlSocket.writeAll(connection, Array(line))
    }

    /// Runs the reload in a task and waits for it on this (the control socket's own) thread.
    private static func reload(_ reloader: ConfigurationReloader, trigger: String) -> ControlSocket.Answer {
        let result = Mutex<ControlSocket.Answer?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let answer: ControlSocket.Answer
            do {
                answer = .init(status: "reloaded", outcome: try await reloader.reload(trigger: trigger))
            } catch {
                answer = .init(status: "refused", reason: "\(error)")
            }
            result.withLock { $0 = answer }
            done.signal()
        }
        done.wait()
        return result.withLock { $0 } ?? .init(status: "refused", reason: "no answer")
    }
}

/// `struct ucred`, as `SO_PEERCRED` fills it.
private struct PeerCredentials {
    var pid: pid_t
    var uid: uid_t
    var gid: gid_t
}
