import Configuration
import NIOCore

extension ConnectionLimits {
    /// Reads the connection limits of the `http` section; a key that is not set keeps its default,
    /// and `intake_reserved_connections` defaults to an eighth of the `max_connections` read.
    public init(config: ConfigReader) {
        self.init(maxConnections: max(2, config.int(forKey: "max_connections", default: Self().maxConnections)))
        intakeReserved = min(
            max(
                1,
                config.int(forKey: "intake_reserved_connections", default: Self.defaultIntakeShare(of: maxConnections))
            ),
            maxConnections - 1
        )
        idleTimeout = Self.seconds(
            max(1, config.int(forKey: "idle_timeout_seconds", default: Self.seconds(idleTimeout)))
        )
        headerTimeout = Self.seconds(
            max(1, config.int(forKey: "header_timeout_seconds", default: Self.seconds(headerTimeout)))
        )
        bodyTimeout = Self.seconds(
            max(1, config.int(forKey: "body_timeout_seconds", default: Self.seconds(bodyTimeout)))
        )
        userTimeout = Self.seconds(
            min(max(0, config.int(forKey: "tcp_user_timeout_seconds", default: Self.seconds(userTimeout))), 3600)
        )
    }

    private static func seconds(_ amount: TimeAmount) -> Int { Int(amount.nanoseconds / 1_000_000_000) }
    private static func seconds(_ count: Int) -> TimeAmount { .seconds(Int64(count)) }
}
