/// How bulk-unregister jobs run (`jobs.*`); the values below are the defaults, and
/// `JobSettings+ConfigReader.swift` reads the keys.
///
/// Keys, read from a reader scoped to `jobs`:
/// - `batch_size` (int, default 50000): tokens removed per transaction.
/// - `parallel_batches` (int, default 2): batches of one job run at once, each on its own connection.
/// - `poll_interval_ms` (int, default 1000, at least 10): how often runnable jobs are looked for without a NOTIFY.
/// - `lease_seconds` (int, default 30): how long a job stays this instance's without a batch renewing it.
/// - `max_upload_bytes` (int, default 268435456): most bytes of a text or CSV upload.
public struct JobSettings: Sendable, Equatable {
    public var batchSize = 50_000
    public var parallelBatches = 2
    public var pollInterval = Duration.seconds(1)
    public var lease = Duration.seconds(30)
    /// Most bytes of a text or CSV bulk-unregister upload (256 MiB: a million FCM tokens with room
    /// to spare); a larger one is refused with 413 and nothing stored.
    public var maxUploadBytes = 256 << 20

    public init() {}
}
