import Synchronization

/// Webhook intake settings; the initialiser's arguments are the defaults, and
/// `WebhookSettings+ConfigReader.swift` reads the keys.
///
/// Keys, read from a reader scoped to `webhooks`:
/// - `max_devices` (int, default 1000): devices accepted in one webhook.
/// - `signature_tolerance_seconds` (double, default 300): replay window for signed webhooks.
/// - `batch_size` (int, default 500): most webhooks stored by one group commit.
/// - `concurrent_writes` (int, default 2): group commits in flight at once.
/// - `concurrent_write_after_ms` (int, default 5; 0 starts one at once): while group commits are
///   in flight, another starts beside them only once each has taken this long; until then the
///   next batch grows (``IntakeWriter``).
/// - `pace_waiting_deliveries` (int, default 250; 0 turns it off) and `pace_max_wait_ms` (int,
///   default 250): while more of this instance's deliveries than that wait for a sender, the next
///   group commit is held back, up to that long (``IntakeWriter``). On a saturated instance this
///   keeps delivery up with intake: the backlog and the commit→outcome tail stay short, and fewer
///   deliveries fall back to a claim query (docs/benchmarks.md).
///
/// `max_devices` and `signature_tolerance_seconds` change with a reload (``Limits``); the others
/// are read at start.
public struct WebhookSettings: Sendable {
    /// The limits a reload changes, shared by every copy of these settings.
    final class Limits: Sendable {
        private let devices: Atomic<Int>
        private let tolerance: Atomic<UInt64>

        init(maxDevices: Int, signatureTolerance: Double) {
            devices = Atomic(maxDevices)
            tolerance = Atomic(signatureTolerance.bitPattern)
        }

        var maxDevices: Int { devices.load(ordering: .relaxed) }
        var signatureTolerance: Double { Double(bitPattern: tolerance.load(ordering: .relaxed)) }

        func set(maxDevices: Int, signatureTolerance: Double) {
            devices.store(maxDevices, ordering: .relaxed)
            tolerance.store(signatureTolerance.bitPattern, ordering: .relaxed)
        }
    }

    /// The keys ``Limits`` follows (a reload applies them).
    static let reloadableKeys = ["webhooks.max_devices", "webhooks.signature_tolerance_seconds"]

    public var maxDevices: Int
    public var signatureTolerance: Double
    let limits: Limits
    public var batchSize: Int
    public var concurrentWrites: Int
    public var concurrentWriteAfter: Duration
    public var paceWaitingDeliveries: Int
    public var paceMaxWait: Duration

    /// The defaults, or the values given.
    public init(
        maxDevices: Int = 1000,
        signatureTolerance: Double = 300,
        batchSize: Int = 500,
        concurrentWrites: Int = 2,
        concurrentWriteAfter: Duration = .milliseconds(5),
        paceWaitingDeliveries: Int = 250,
        paceMaxWait: Duration = .milliseconds(250)
    ) {
        self.maxDevices = maxDevices
        self.signatureTolerance = signatureTolerance
        self.batchSize = batchSize
        self.concurrentWrites = concurrentWrites
        self.concurrentWriteAfter = concurrentWriteAfter
        self.paceWaitingDeliveries = paceWaitingDeliveries
        self.paceMaxWait = paceMaxWait
        limits = Limits(maxDevices: maxDevices, signatureTolerance: signatureTolerance)
    }

    /// A reload: `other`'s limits are used by every copy of these settings from now on.
    func applyLimits(of other: WebhookSettings) {
        limits.set(maxDevices: other.maxDevices, signatureTolerance: other.signatureTolerance)
    }
}
