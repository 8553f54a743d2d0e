import Foundation
import Synchronization

extension ConsoleSessionStore {
    /// This instance's memory of console sessions, by token hash: the live ones as last read, with
    /// the key generation they were read under, and the hashes the table did not hold.
    final class SessionCache: Sendable {
        /// Most entries of each kind; when full, that kind starts over.
        static let capacity = 10_000

        enum Lookup {
            case live(Session)
            /// Not a session: made up, or ended (a token is never handed out again).
            case unknown
            /// Not held, or held under another generation or for too long: read the table.
            case stale
        }

        private struct Entry {
            var session: Session
            var generation: Int64?
            var until: ContinuousClock.Instant
        }

        private struct Table {
            var live: [Data: Entry] = [:]
            var unknown: Set<Data> = []
        }

        private let table = Mutex(Table())

        func lookup(_ hash: Data, generation: Int64?, now: ContinuousClock.Instant) -> Lookup {
            table.withLock { table in
                if table.unknown.contains(hash) { return .unknown }
                guard let entry = table.live[hash] else { return .stale }
                guard entry.generation == generation, generation != nil, now < entry.until else {
                    table.live[hash] = nil
                    return .stale
                }
                return .live(entry.session)
            }
        }

        /// Keeps what the table said of `hash`: a live session until `until` under `generation`,
        /// or (`nil`) that it holds none.
        func store(_ hash: Data, session: Session?, generation: Int64?, until: ContinuousClock.Instant) {
            table.withLock { table in
                guard let session else {
                    table.live[hash] = nil
                    if table.unknown.count >= Self.capacity { table.unknown = [] }
                    table.unknown.insert(hash)
                    return
                }
                guard generation != nil else { return }
                if table.live.count >= Self.capacity { table.live = [:] }
                table.live[hash] = Entry(session: session, generation: generation, until: until)
            }
        }

        /// The session of `hash` was ended here (sign-out).
        func ended(_ hash: Data) {
            store(hash, session: nil, generation: nil, until: .now)
        }
    }
}
