/// How long history is kept (`retention.*`); the values below are the defaults, and
/// `RetentionSettings+ConfigReader.swift` reads the keys.
///
/// Keys, read from a reader scoped to `retention`:
/// - `enabled` (bool, default true): whether this instance takes part in pruning.
/// - `delivered_days` (int, default 30): deliveries `delivered` or `skipped` are deleted this many
///   days after their last change.
/// - `failed_days` (int, default 90): deliveries `failed`, `expired` or `dead_token`, and feedback
///   events still unsent, after this many days.
/// - `jobs_days` (int, default 30): finished bulk-unregister jobs (succeeded, failed, cancelled)
///   are deleted this many days after they finished, with anything left of their uploads.
/// - `zendesk_forwarded_days` (int, default 30): tokens Zendesk accepted are deleted from
///   `zendesk_unregister_queue` this many days after they were forwarded.
/// - `interval_seconds` (int, default 3600): time between runs.
/// - `batch_size` (int, default 2000): rows looked at per statement; each statement is its own
///   short transaction.
/// - `batch_pause_ms` (int, default 50): pause between statements, so webhooks keep their share of
///   the database while a large backlog is pruned.
/// - `partition_days` (int, 1 to 31, default 7): days of history per partition of `notifications`
///   and `deliveries` (``HistoryPartitions``); a change applies to partitions created after it.
/// - `partitions_ahead_days` (int, 1 to 366, default 14): the retention lease holder keeps
///   partitions created this many days ahead of today.
public struct RetentionSettings: Sendable, Equatable {
    public var enabled = true
    public var deliveredDays = 30
    public var failedDays = 90
    public var jobsDays = 30
    public var zendeskForwardedDays = 30
    public var interval = Duration.seconds(3600)
    /// Rows looked at per statement, 1 to 100,000.
    public var batchSize = 2000
    public var batchPause = Duration.milliseconds(50)
    /// Days per history partition, 1 to 31.
    public var partitionDays = 7
    /// Days of partitions kept created ahead of today, 1 to 366.
    public var partitionsAheadDays = 14

    public init() {}
}
