import Logging
import NIOPosix
import ServiceLifecycle
import Synchronization

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
/// One listener serves every consumer of a process, each through its own stream of the channels
/// it wants (``events(on:)``): every listening connection is a server process that PostgreSQL
/// wakes for each NOTIFY on any channel, so one connection on three channels costs the server a
/// third of what three connections on one channel each cost.
///
/// It waits on the socket from its own thread, in short slices so that shutdown is prompt.
public final class PostgresListener: Service, Sendable {
    private struct Subscription {
        var channels: Set<String>
        var continuation: AsyncStream<PostgresListenerEvent>.Continuation
    }

    private let subscriptions = Mutex<[Subscription]>([])
    private let conninfo: String
    private let channels: [String]
    private let logger: Logger
    private let threadPool: NIOThreadPool
    private let settings: PostgresConnectionSettings
    private let probeInterval: Duration
    private let trouble: TroubleLog?

    /// - Parameters:
    ///   - conninfo: libpq connection string.
    ///   - channels: channel names; lowercase letters, digits and underscores only.
    ///   - settings: the connection's timeouts and keepalives.
    ///   - probeInterval: after this long without a message from the server, the listener asks it
    ///     a question (`SELECT 1`, answered within the settings' call timeout) to learn whether it
    ///     is still there: a server that vanished without closing the connection sends nothing,
    ///     exactly like a quiet one, and something in between may keep the TCP connection alive.
    ///   - client: the pool on the same database, if any: the listener's failures and recoveries
    ///     count in its single "database unavailable" / "database available again" pair of lines,
    ///     and its own reconnect lines are at debug while the database is unavailable.
    public init(
        conninfo: String,
        channels: [String],
        settings: PostgresConnectionSettings = .init(),
        probeInterval: Duration = .seconds(5),
        reportingTo client: PostgresClient? = nil,
        logger: Logger
    ) throws {
        for channel in channels {
            guard !channel.isEmpty, channel.utf8.count <= 63,
                channel.utf8.allSatisfy({ ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 })
            else { throw PostgresError(code: .server, message: "invalid channel name \(channel)") }
        }
        self.conninfo = conninfo
        self.channels = channels
        self.settings = settings
        self.probeInterval = max(probeInterval, .milliseconds(100))
        self.trouble = client?.trouble
        self.logger = logger
        self.threadPool = NIOThreadPool(numberOfThreads: 1)
        self.threadPool.start()
    }

    /// A new stream of this listener's events: every ``PostgresListenerEvent/listening`` and
    /// ``PostgresListenerEvent/lost``, and the notifications on `channels` (on all of the
    /// listener's channels when `nil`), in arrival order. A stream sees only what happens after
    /// it is made, so make the streams before the listener runs; each has one consumer, and ends
    /// when the listener stops.
    public func events(on channels: [String]? = nil) -> AsyncStream<PostgresListenerEvent> {
        let wanted = Set(channels ?? self.channels)
        precondition(wanted.isSubset(of: self.channels), "a listener on \(self.channels) was asked for \(wanted)")
        let (stream, continuation) = AsyncStream.makeStream(of: PostgresListenerEvent.self, bufferingPolicy: .bufferingNewest(10_000))
        subscriptions.withLock { $0.append(Subscription(channels: wanted, continuation: continuation)) }
        return stream
    }

    private func yield(_ event: PostgresListenerEvent) {
        subscriptions.withLock { subscriptions in
            for subscription in subscriptions {
                if case .notification(let notification) = event, !subscription.channels.contains(notification.channel) { continue }
                subscription.continuation.yield(event)
            }
        }
    }

    deinit {
        threadPool.shutdownGracefully { _ in }
    }

    public func run() async throws {
        defer { subscriptions.withLock { for subscription in $0 { subscription.continuation.finish() } } }
        await cancelWhenGracefulShutdown {
            var delay = Duration.milliseconds(100)
            while !Task.isCancelled {
                var began = ContinuousClock.now
                do {
                    try await self.listen(began: &began)
                } catch is CancellationError {
                    return
                } catch {
                    if Task.isCancelled { return }
                    self.yield(.lost)
                    if let trouble = self.trouble {
                        // The pool's trouble log says "database unavailable" once per outage.
                        trouble.failed(error, began: began, logger: self.logger)
                        self.logger.log(
                            level: PostgresError.logLevel(for: error),
                            "PostgreSQL listener lost its connection; reconnecting",
                            metadata: ["error": "\(error)"]
                        )
                    } else {
                        self.logger.warning("PostgreSQL listener lost its connection; reconnecting", metadata: ["error": "\(error)"])
                    }
                    try? await Task.sleep(for: delay)
                    delay = min(delay * 2, .seconds(5))
                    continue
                }
                delay = .milliseconds(100)
            }
        }
    }

    /// `began` is set to when the current call to the server started, for the trouble log.
    private func listen(began: inout ContinuousClock.Instant) async throws {
        let conninfo = self.conninfo
        let channels = self.channels
        var probing = self.settings
        // The probe's answer is due within the probe's own deadline, whatever the pool allows a
        // statement: `SELECT 1` has nothing to wait for.
        probing.statementTimeoutMilliseconds = min(probing.statementTimeoutMilliseconds == 0 ? 5000 : probing.statementTimeoutMilliseconds, 5000)
        let settings = probing
        let connection = try await threadPool.runIfActive {
            let connection = try LibPQConnection.connect(conninfo: conninfo, applicationName: "push-relay-listener", settings: settings)
            for channel in channels {
                _ = try connection.execute("LISTEN \(try connection.escapeIdentifier(channel))")
            }
            return connection
        }
        yield(.listening)
        trouble?.succeeded(logger: logger)
        logger.debug("PostgreSQL listener ready", metadata: ["db.channels": "\(channels.joined(separator: ","))"])
        let clock = ContinuousClock()
        var heard = clock.now
        while !Task.isCancelled {
            began = clock.now
            let notifications = try await threadPool.runIfActive {
                try connection.waitForNotifications(timeoutMilliseconds: 250)
            }
            for notification in notifications { yield(.notification(notification)) }
            if !notifications.isEmpty {
                heard = clock.now
            } else if clock.now - heard >= probeInterval {
                // Throws when the server does not answer in time; run() then reconnects.
                began = clock.now
                try await threadPool.runIfActive { _ = try connection.execute("SELECT 1") }
                heard = clock.now
            }
        }
    }
}
