import CJournalStream
import Foundation
import Logging

/// Syslog priorities for lines written to the systemd journal through a unit's standard output
/// or error.
///
/// journald reads a `<N>` at the start of a line as the line's priority and takes it off
/// (`SyslogLevelPrefix=`, on by default), so a line written as `<3>…` is stored at priority 3
/// (err) instead of the stream's 6 (info). systemd sets `JOURNAL_STREAM` to the device and inode
/// of the stream it connected (`dev:ino`); a process whose own stream matches writes to the
/// journal, and one whose output was redirected elsewhere (a file, a pipe, a terminal) does not,
/// whatever it inherited.
public enum JournalPriority {
    /// The prefix for a line at `level`: `<7>` debug and trace, `<6>` info, `<5>` notice,
    /// `<4>` warning, `<3>` error, `<2>` critical.
    public static func prefix(_ level: Logger.Level) -> String {
        switch level {
        case .trace, .debug: "<7>"
        case .info: "<6>"
        case .notice: "<5>"
        case .warning: "<4>"
        case .error: "<3>"
        case .critical: "<2>"
        }
    }

    /// Whether this process's standard error is the journal stream `JOURNAL_STREAM` names.
    public static let standardErrorIsJournal: Bool = isJournal(
        descriptor: STDERR_FILENO,
        journalStream: ProcessInfo.processInfo.environment["JOURNAL_STREAM"]
    )

    /// Whether `descriptor` is the stream `journalStream` (`JOURNAL_STREAM`'s `dev:ino`, decimal) names.
    public static func isJournal(descriptor: Int32, journalStream: String?) -> Bool {
        guard let journalStream else { return false }
        let parts = journalStream.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        return push_relay_is_stream(descriptor, device, inode) == 1
    }
}
