import Logging
import NIOPosix
import ServiceLifecycle

/// What a ``PostgresListener`` reports.
public enum PostgresListenerEvent: Sendable, Hashable {
    /// The listener (re)connected and is listening. Notifications sent while it was away are lost,
    /// so a consumer should re-read its table on this event: the table is the truth, NOTIFY only
    /// wakes.
    case listening
    /// A notification on one of the channels.
    case notification(PostgresNotification)
    /// The connection failed; notifications are lost until the next ``listening``.
    case lost
}

/// A `Service` that holds one dedicated connection in `LISTEN` on a fixed set of channels and
/// reconnects with backoff when the server goes away.
///
/// It waits on the socket from its own thread, in short slices so that shutdown is prompt.
public final class PostgresListener: Service, Sendable {
    /// Events in arrival order. There is one consumer; iterate it from the service that reacts.
    public let events: AsyncStream<PostgresListenerEvent>
    private let continuation: AsyncStream<PostgresListenerEvent>.Continuation
    private let conninfo: String
    private let channels: [String]
    private let logger: Logger
    private let threadPool: NIOThreadPool

    /// - Parameters:
    ///   - conninfo: libpq connection string.
    ///   - channels: channel names; lowercase letters, digits and underscores only.
    public init(conninfo: String, channels: [String], logger: Logger) throws {
        for channel in channels {
            guard !channel.isEmpty, channel.utf8.count <= 63,
                channel.utf8.allSatisfy({ ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 })
            else { throw PostgresError(code: .server, message: "invalid channel name \(channel)") }
        }
        (events, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(10_000))
        self.conninfo = conninfo
        self.channels = channels
        self.logger = logger
        self.threadPool = NIOThreadPool(numberOfThreads: 1)
        self.threadPool.start()
    }

    deinit {
        threadPool.shutdownGracefully { _ in }
    }

    public func run() async throws {
        defer { continuation.finish() }
        await cancelWhenGracefulShutdown {
            var delay = Duration.milliseconds(100)
            while !Task.isCancelled {
                do {
                    try await self.listen()
                } catch is CancellationError {
                    return
                } catch {
                    if Task.isCancelled { return }
                    self.continuation.yield(.lost)
                    self.logger.warning("PostgreSQL listener lost its connection; reconnecting", metadata: ["error": "\(error)"])
                    try? await Task.sleep(for: delay)
                    delay = min(delay * 2, .seconds(5))
                    continue
                }
                delay = .milliseconds(100)
            }
        }
    }

    private func listen() async throws {
        let conninfo = self.conninfo
        let channels = self.channels
        let connection = try await threadPool.runIfActive {
            let connection = try LibPQConnection.connect(conninfo: conninfo, applicationName: "push-relay-listener")
            for channel in channels {
                _ = try connection.execute("LISTEN \(try connection.escapeIdentifier(channel))")
            }
            return connection
        }
        continuation.yield(.listening)
        logger.debug("PostgreSQL listener ready", metadata: ["db.channels": "\(channels.joined(separator: ","))"])
        while !Task.isCancelled {
            let notifications = try await threadPool.runIfActive {
                try connection.waitForNotifications(timeoutMilliseconds: 250)
            }
            for notification in notifications { continuation.yield(.notification(notification)) }
        }
    }
}
