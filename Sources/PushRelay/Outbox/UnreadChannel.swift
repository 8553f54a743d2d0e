/// The channel on which changes of unread counts are announced. The payload lists the changed
/// owners, one `app owner` per line. A change of more owners than fit one payload (PostgreSQL's
/// limit is 8,000 bytes) is announced in several, so a large webhook makes every listener forget
/// the ETags of the owners it changed and no others. A payload of `*` (what earlier versions sent
/// for such a change) still means every owner.
enum UnreadChannel {
    static let name = "push_relay_unread"

    /// Owner lines are grouped by where their running length ends, in steps of this many bytes: a
    /// payload holds at most this plus one line (an app id of 64 bytes, a space and an owner of at
    /// most 1,024), well under PostgreSQL's 8,000.
    static let chunkBytes = 3900
}
