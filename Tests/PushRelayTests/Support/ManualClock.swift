import TestSupport

@testable import PushRelay

extension RelayClock {
    /// The relay's clock on a test's ``ManualTime``.
    init(_ time: ManualTime) {
        self.init(now: { time.now }, sleepUntil: { try await time.sleep(until: $0) })
    }
}
