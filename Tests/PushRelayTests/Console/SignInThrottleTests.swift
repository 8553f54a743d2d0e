import Foundation
import TestSupport
import Testing

@testable import PushRelay

/// ``SignInThrottle`` on a clock the test moves.
@Suite("Console sign-in throttle")
struct SignInThrottleTests {
    @Test("each key and address has its limit a minute, refilled evenly; a refused attempt takes nothing; Retry-After is the longer wait")
    func buckets() {
        let time = ManualTime()
        let throttle = SignInThrottle(perKey: 2, perAddress: 3, clock: RelayClock(time))
        #expect(throttle.admit(key: "prk_a", address: "10.0.0.1") == nil)
        #expect(throttle.admit(key: "prk_a", address: "10.0.0.1") == nil)
        #expect(throttle.admit(key: "prk_a", address: "10.0.0.1") == 30, "the key's next attempt in 60 s / 2")
        // The refused attempt took nothing: the address has one left, for another key.
        #expect(throttle.admit(key: "prk_b", address: "10.0.0.1") == nil)
        #expect(throttle.admit(key: "prk_b", address: "10.0.0.1") == 20, "the address's next in 60 s / 3")
        #expect(throttle.admit(key: nil, address: "10.0.0.1") == 20, "a made-up key counts against its address")
        #expect(throttle.admit(key: "prk_b", address: "10.0.0.2") == nil, "another address, the key's own second")
        time.advance(by: .seconds(20))
        // 20 s refilled the address one attempt and key a two thirds of one.
        #expect(throttle.admit(key: "prk_a", address: "10.0.0.1") == 10)
        time.advance(by: .seconds(10))
        #expect(throttle.admit(key: "prk_a", address: "10.0.0.1") == nil)
        // A minute idle refills to the limit, not past it.
        time.advance(by: .seconds(600))
        #expect(throttle.admit(key: "prk_c", address: "10.0.0.3") == nil)
        #expect(throttle.admit(key: "prk_c", address: "10.0.0.3") == nil)
        #expect(throttle.admit(key: "prk_c", address: "10.0.0.3") != nil)
    }

    @Test("a flood of addresses stays within the bytes and evicts addresses, never a key's bucket")
    func bounded() {
        let time = ManualTime()
        let throttle = SignInThrottle(perKey: 1, perAddress: 1000, clock: RelayClock(time), maxBytes: 64 << 10)
        #expect(throttle.admit(key: "prk_a", address: "10.0.0.1") == nil)
        for index in 0..<5000 { _ = throttle.admit(key: nil, address: "198.51.\(index / 256).\(index % 256)") }
        #expect(throttle.admit(key: "prk_a", address: "10.0.0.9") != nil, "the key's used attempt is still remembered")
    }
}
