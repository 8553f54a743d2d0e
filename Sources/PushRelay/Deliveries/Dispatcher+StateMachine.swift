import Foundation
import NIOCore

extension Dispatcher {
    /// One provider's line: an app's APNs or FCM deliveries.
    struct Line: Hashable, Sendable {
        var app: String
        var platform: Platform
    }

    /// The dispatcher's decisions, without I/O: what to claim and when, which deliveries wait for
    /// which sender, what a provider's answer means for a delivery, and shutdown. A value type whose
    /// mutating methods say what the caller (``Dispatcher``, which owns the database, the providers,
    /// the clock and the tasks) must do next; it never sleeps, logs or reads the clock itself.
    ///
    /// Rules it keeps:
    /// - Each app has at most `maxInFlightPerApp` deliveries claimed and not finished (waiting for
    ///   a sender, or being sent), whether claimed by a query or stored claimed by intake. An app
    ///   whose provider hangs keeps its own rows waiting and no one else's.
    /// - A claim query is wanted after a wake-up (NOTIFY, the poll, room freed in a full app) and
    ///   repeated while one comes back full; a hand-over from intake alone needs none.
    /// - Each line has at most `sendersPerLine` senders; the deliveries beyond wait in order.
    /// - A delivery is sent only within its send window after the claim; past it, it is handed back
    ///   uncounted for when its lease ends (another claimer could otherwise send it too).
    /// - Once stopping, nothing is claimed or reserved, and deliveries still waiting are handed
    ///   back uncounted, due at once.
    struct StateMachine: Sendable {
        enum Phase: Sendable, Equatable {
            case running
            case stopping
        }

        let settings: DeliverySettings
        /// The apps whose deliveries this instance claims; a reload changes them.
        var apps: [String]
        private(set) var phase = Phase.running
        /// Claimed and not finished, per app.
        private(set) var inFlight: [String: Int] = [:]
        /// Claimed deliveries waiting for a sender, per line, oldest first.
        private var waiting: [Line: CircularBuffer<ClaimedDelivery>] = [:]
        /// Senders running (or asked to start) per line.
        private(set) var senders: [Line: Int] = [:]
        /// Senders the caller has to start.
        private var sendersToStart: [Line] = []
        private var claimWanted = true
        /// Finished deliveries whose new state is still to be written, oldest first.
        private var unwritten: [DeliveryResult] = []
        /// The outcome rules; they need no state, so the caller may use a copy without the lock.
        let rules: OutcomeRules

        init(settings: DeliverySettings, apps: [String]) {
            self.settings = settings
            self.apps = apps
            rules = OutcomeRules(settings: settings)
        }

        /// Sender tasks per line: as many as the provider's HTTP/2 client has streams, so a sender's
        /// request starts as soon as it is made. More would only wait in the client's queue, each
        /// holding a task's memory; claimed deliveries beyond it wait here as plain values, so
        /// `maxInFlightPerApp` can be large.
        var sendersPerLine: Int {
            max(1, settings.eventThreads * settings.connectionsPerHost * settings.streamsPerConnection)
        }

        /// Deliveries waiting for a sender on `line`.
        func waitingCount(on line: Line) -> Int { waiting[line]?.count ?? 0 }

        /// Deliveries waiting for a sender on every line.
        var waitingTotal: Int { waiting.values.reduce(0) { $0 + $1.count } }

        private func isFull(_ app: String) -> Bool { inFlight[app, default: 0] >= settings.maxInFlightPerApp }

        // MARK: Claiming

        /// Something may have come due (a NOTIFY, the poll, room freed): the next look claims.
        mutating func wantClaim() {
            claimWanted = true
        }

        /// Whether the caller should claim now; takes the wish, so one wake-up gives one round of
        /// claims (repeated by ``claimed(_:for:)`` while they come back full).
        mutating func startClaiming() -> Bool {
            guard phase == .running, claimWanted else { return false }
            claimWanted = false
            return true
        }

        /// One claim query: the apps with room and how many of each, at most a batch each.
        struct ClaimRequest: Sendable, Equatable {
            var apps: [String]
            var limits: [Int]
            var total: Int { limits.reduce(0, +) }
        }

        /// The claim to run now, or `nil` when no app has room (or the dispatcher is stopping).
        func claimRequest() -> ClaimRequest? {
            guard phase == .running else { return nil }
            var request = ClaimRequest(apps: [], limits: [])
            for app in apps {
                let room = settings.maxInFlightPerApp - inFlight[app, default: 0]
                guard room > 0 else { continue }
                request.apps.append(app)
                request.limits.append(min(room, settings.batchSize))
            }
            return request.apps.isEmpty ? nil : request
        }

        /// A claim query came back with `deliveries`: they are in flight and wait on their lines.
        /// - Returns: whether to claim again at once (the query came back full, so more may be due).
        mutating func claimed(_ deliveries: [ClaimedDelivery], for request: ClaimRequest) -> Bool {
            for delivery in deliveries { inFlight[delivery.appID, default: 0] += 1 }
            queue(deliveries)
            return !deliveries.isEmpty && deliveries.count >= request.total && phase == .running
        }

        // MARK: Hand-over from intake

        /// Reserves room for up to `count` deliveries of `app` that intake will store already
        /// claimed; returns how many were granted (none for an app this instance does not deliver,
        /// or while stopping). Each granted slot is handed over or released.
        mutating func reserve(app: String, count: Int) -> Int {
            guard phase == .running, apps.contains(app) else { return 0 }
            let granted = max(0, min(count, settings.maxInFlightPerApp - inFlight[app, default: 0]))
            inFlight[app, default: 0] += granted
            return granted
        }

        /// Gives back reserved slots that were not used.
        /// - Returns: whether to ring for a claim (the app was full, so rows may wait for the room).
        mutating func release(app: String, count: Int) -> Bool {
            guard count > 0 else { return false }
            let wasFull = isFull(app)
            inFlight[app, default: 0] -= count
            if wasFull { claimWanted = true }
            return wasFull
        }

        /// Deliveries intake stored claimed for this instance (their slots reserved) wait on their lines.
        mutating func handOff(_ deliveries: [ClaimedDelivery]) {
            queue(deliveries)
        }

        private mutating func queue(_ deliveries: [ClaimedDelivery]) {
            for delivery in deliveries {
                let line = Line(app: delivery.appID, platform: delivery.platform)
                waiting[line, default: CircularBuffer()].append(delivery)
                if senders[line, default: 0] < sendersPerLine {
                    senders[line, default: 0] += 1
                    sendersToStart.append(line)
                }
            }
        }

        /// The senders the caller must start now, one task per entry.
        mutating func takeSendersToStart() -> [Line] {
            defer { sendersToStart = [] }
            return sendersToStart
        }

        // MARK: Sending

        enum NextSend: Sendable, Equatable {
            /// Send it (``preflight(_:now:hasProvider:)``, the provider, ``decide(_:_:now:jitter:)``).
            case send(ClaimedDelivery)
            /// Do not send it; record this result (and ``finished(_:)`` it).
            case handBack(DeliveryResult)
            /// Nothing is waiting: the sender ends.
            case stop
        }

        /// The next delivery for a sender of `line`, oldest first. `now` is the monotonic time
        /// the send window is measured with; `date` is when a delivery handed back at shutdown is due.
        mutating func nextSend(on line: Line, now: ContinuousClock.Instant, date: @autoclosure () -> Date) -> NextSend {
            guard let delivery = waiting[line]?.popFirst() else {
                senders[line, default: 1] -= 1
                return .stop
            }
            if phase == .stopping {
                return .handBack(.handedBack(delivery, outcome: .handedBack, next: date(), reason: nil))
            }
            if now - delivery.claimedAt > settings.sendWindow {
                return .handBack(
                    .handedBack(
                        delivery,
                        outcome: .lapsed,
                        next: nil,
                        reason: "waited for a sender past its lease; claimed again later"
                    )
                )
            }
            return .send(delivery)
        }

        /// A delivery is finished (sent, decided or handed back): its slot is free, and its result
        /// waits to be written (``takeUnwritten(max:)``).
        /// - Returns: whether to ring for a claim (the app was full).
        mutating func finished(_ result: DeliveryResult) -> Bool {
            let app = result.delivery.appID
            let wasFull = isFull(app)
            inFlight[app, default: 0] -= 1
            unwritten.append(result)
            if wasFull { claimWanted = true }
            return wasFull && phase == .running
        }

        // MARK: Writing outcomes

        /// Up to `max` results to write now, oldest first.
        mutating func takeUnwritten(max: Int) -> [DeliveryResult] {
            let count = min(unwritten.count, max)
            defer { unwritten.removeFirst(count) }
            return Array(unwritten.prefix(count))
        }

        /// Writing `batch` failed: it goes back in front, to be written first next time (until then
        /// the rows stay leased; after the lease they would be sent again, at least once).
        mutating func writeFailed(_ batch: [DeliveryResult]) {
            unwritten.insert(contentsOf: batch, at: 0)
        }

        // MARK: Shutdown

        /// Graceful shutdown: no more claims or reservations; waiting deliveries are handed back.
        mutating func beginShutdown() {
            phase = .stopping
        }
    }
}
