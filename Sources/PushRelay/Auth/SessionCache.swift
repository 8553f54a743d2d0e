import Foundation
import Synchronization

extension ConsoleSessionStore {
    /// What this instance adds to the in-memory copy of sessions (``APIKeyCache``): when it last
    /// wrote each session's use, and the tokens known to have no session.
    final class SessionCache: Sendable {
        /// Most entries of each kind; when full, that kind starts over.
        static let capacity = 10_000

        private struct Table {
            /// When this instance last wrote a session's `last_seen_at`, under which generation of
            /// the copy: a copy read again carries the table's own value, which wins.
            var touched: [Data: (at: Date, generation: Int64)] = [:]
            /// Made up, signed out, expired: a token is never handed out again.
            var ended: Set<Data> = []
        }

        private let table = Mutex(Table())

        func hasEnded(_ hash: Data) -> Bool { table.withLock { $0.ended.contains(hash) } }

        /// The session has no row (any more), or its row is over.
        func ended(_ hash: Data) {
            table.withLock { table in
                table.touched[hash] = nil
                if table.ended.count >= Self.capacity { table.ended = [] }
                table.ended.insert(hash)
            }
        }

        /// When this instance last wrote the session's use, if under `generation`.
        func touched(_ hash: Data, generation: Int64) -> Date? {
            table.withLock { table in
                guard let entry = table.touched[hash], entry.generation == generation else { return nil }
                return entry.at
            }
        }

        func touch(_ hash: Data, at date: Date, generation: Int64) {
            table.withLock { table in
                if table.touched.count >= Self.capacity { table.touched = [:] }
                table.touched[hash] = (date, generation)
            }
        }
    }
}
