/// The channel on which changes of unread counts are announced. The payload lists the changed
/// owners, one `app owner` per line, or is `*` when the list would not fit (then every listener
/// re-reads).
enum UnreadChannel {
    static let name = "push_relay_unread"
}
