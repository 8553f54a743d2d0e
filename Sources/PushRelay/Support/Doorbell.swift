/// A wake-up channel for a service's loop: any number of rings before the loop looks again count
/// as one, so a ring is never lost and never queues up work. `close()` ends the loop's
/// `for await _ in doorbell.rings` once the pending ring, if any, is taken.
struct Doorbell: Sendable {
    let rings: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (rings, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    func ring() { continuation.yield() }

    func close() { continuation.finish() }
}
