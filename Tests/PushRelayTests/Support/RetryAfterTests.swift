import Foundation
import NIOCore
import TestSupport
import Testing

@testable import PushRelay

/// Numbers from the network read with bounds: the `Retry-After` parser, the backoff it feeds, and
/// the classification of APNs and FCM answers, under extreme and random headers and bodies. A trap
/// here would crash the test process, which is the failure these tests guard against.
@Suite("Retry-After and provider answers with extreme values")
struct RetryAfterTests {
    static let now = Date(timeIntervalSince1970: 1_794_000_000)  // 2026-11-06

    @Test("delta-seconds: digits only, saturating; signs, fractions, exponents, NaN and junk are not Retry-After")
    func deltaSeconds() {
        #expect(RetryAfter.seconds("120") == 120)
        #expect(RetryAfter.seconds(" 7\t") == 7)
        #expect(RetryAfter.seconds("0") == 0)
        #expect(RetryAfter.seconds("000000000000000000000000000000042") == 42)
        #expect(RetryAfter.seconds("10000000000000000") == RetryAfter.ceiling)
        #expect(RetryAfter.seconds("9223372036854775808") == RetryAfter.ceiling)
        #expect(RetryAfter.seconds(String(repeating: "9", count: 100_000)) == RetryAfter.ceiling)
        for junk in ["", " ", "-1", "+5", "1.5", "1e400", "1e3", "NaN", "nan", "inf", "-inf", "Infinity", "0x10", "5 s", "5,6", "٣"] {
            #expect(RetryAfter.seconds(junk) == nil, "\(junk)")
        }
        #expect(RetryAfter.seconds(nil) == nil)
    }

    @Test("HTTP-date in its three forms (RFC 9110): seconds from now, a past date is 0, a far one saturates, junk dates are nil")
    func httpDates() {
        let now = Self.now
        let in90 = HTTPDate.format(Int(now.timeIntervalSince1970) + 90)
        #expect(RetryAfter.seconds(in90, now: now) == 90)
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == 0)
        #expect(RetryAfter.seconds("Sunday, 06-Nov-94 08:49:37 GMT", now: now) == 0)
        #expect(RetryAfter.seconds("Sun Nov  6 08:49:37 1994", now: now) == 0)
        // The same instants in the three forms.
        let base = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT
        #expect(RetryAfter.seconds("Sun, 06 Nov 1994 08:50:37 GMT", now: base) == 60)
        #expect(RetryAfter.seconds("Sunday, 06-Nov-94 08:50:37 GMT", now: base) == 60)
        #expect(RetryAfter.seconds("Sun Nov  6 08:50:37 1994", now: base) == 60)
        #expect(RetryAfter.seconds("Fri, 31 Dec 9999 23:59:59 GMT", now: now) == RetryAfter.ceiling)
        #expect(RetryAfter.seconds("Fri, 06 Nov 2026 00:00:00 GMT", now: now) != nil)
        for junk in [
            "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 29 Feb 2027 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:61:37 GMT", "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 99999 08:49:37 GMT", "Xyz, 06 Nov 1994 08:49:37 GMT", "06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49 GMT", "Sun, 06 Nov 1994 -8:49:37 GMT", "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun Nov 6 08:49:37 -1994", "Sun Nov 99 08:49:37 1994", "Tomorrow", String(repeating: "Sun, ", count: 1000),
        ] {
            #expect(RetryAfter.seconds(junk, now: now) == nil, "\(junk)")
        }
    }

    @Test("backoffDelay cannot trap and stays within its bounds whatever it is given")
    func backoffBounds() {
        let cap = Duration.seconds(3600)
        let extremes: [Int?] = [nil, 0, -1, Int.min, Int.max, RetryAfter.ceiling, 10_000_000_000_000_000]
        for retryAfter in extremes {
            for attempt in [Int.min, -1, 0, 1, 2, 31, 64, Int.max] {
                for jitter in [Double.nan, -.infinity, -1, 0, 0.5, 1, 2, .infinity] {
                    let delay = backoffDelay(
                        base: .milliseconds(100),
                        cap: .seconds(60),
                        attempt: attempt,
                        retryAfter: retryAfter,
                        maxRetryAfter: cap,
                        jitter: jitter
                    )
                    #expect(delay >= .zero && delay <= cap)
                }
            }
        }
        let huge = backoffDelay(base: .seconds(Int64.max), cap: .seconds(Int64.max), attempt: 40, retryAfter: nil, maxRetryAfter: .seconds(Int64.max))
        #expect(huge == longestBackoff)
        let retry = backoffDelay(
            base: .milliseconds(100),
            cap: .seconds(60),
            attempt: 1,
            retryAfter: 10_000_000_000_000_000,
            maxRetryAfter: cap,
            jitter: 0
        )
        #expect(retry == cap)
        let settings = DispatcherStateMachineTests.read(["max_retry_after_seconds": 120])
        #expect(settings.maxRetryAfter == .seconds(120))
        #expect(settings.retryDelay(attempt: 1, retryAfter: RetryAfter.seconds("10000000000000000"), jitter: 0) == .seconds(120))
        #expect(settings.retryDelay(attempt: 1, retryAfter: 30, jitter: 0) == .seconds(30))
    }

    @Test("APNs and FCM answers with random and extreme headers and bodies are classified without trapping; retries wait at most the cap")
    func fuzzClassification() {
        var seeds: [UInt64] = [20_261_126]
        if let text = ProcessInfo.processInfo.environment["PUSH_RELAY_FUZZ_SEED"], let seed = UInt64(text) {
            seeds.append(seed)
        } else {
            let seed = UInt64.random(in: 0...UInt64.max)
            print("retry-after fuzz: random seed \(seed)")
            seeds.append(seed)
        }
        let numbers = [
            "10000000000000000", "9223372036854775807", "9223372036854775808", "-9223372036854775809", "1e400", "-1e400", "1e-400",
            "NaN", "Infinity", "-0", "0", "3", "1.5", "18446744073709551616", String(repeating: "9", count: 5000),
        ]
        let headers =
            numbers + [
                "", " ", "Sun, 06 Nov 1994 08:49:37 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                "Sun Nov  6 08:49:37 1994", "Sun, 99 Nov 1994 99:99:99 GMT", "\u{0}", "\u{FFFD}\u{FFFD}", "3, 4",
            ]
        let statuses = [0, -1, 100, 200, 400, 401, 403, 404, 410, 413, 429, 500, 502, 503, 504, 999, Int.max, Int.min]
        let settings = DispatcherStateMachineTests.settings()
        var checked = 0
        for seed in seeds {
            var generator = SeededGenerator(state: seed)
            for _ in 0..<2000 {
                let status = statuses.randomElement(using: &generator)!
                let header: String? =
                    switch Int.random(in: 0..<4, using: &generator) {
                    case 0: nil
                    case 1: headers.randomElement(using: &generator)!
                    case 2: String(Int.random(in: Int.min...Int.max, using: &generator))
                    default:
                        String(
                            decoding: (0..<Int.random(in: 0..<40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) },
                            as: UTF8.self
                        )
                    }
                let body = Self.body(&generator, numbers: numbers)
                let outcomes = [
                    PushOutcome.apns(status: status, body: body, retryAfter: header, apnsID: header, now: Self.now),
                    PushOutcome.fcm(status: status, body: body, retryAfter: header, now: Self.now),
                ]
                for outcome in outcomes {
                    checked += 1
                    switch outcome {
                    case .retry(_, let retryAfter):
                        if let retryAfter { #expect((0...RetryAfter.ceiling).contains(retryAfter)) }
                        let delay = settings.retryDelay(attempt: Int.random(in: -5...100, using: &generator), retryAfter: retryAfter)
                        #expect(delay >= .zero && delay <= max(settings.maxRetryAfter, settings.retryMax))
                    case .deadToken(_, let since):
                        if let since {
                            #expect(since.timeIntervalSince1970 >= 0 && since <= Self.now.addingTimeInterval(86400))
                        }
                    default:
                        break
                    }
                }
            }
        }
        #expect(checked == 2 * 2000 * seeds.count)
        // The end-to-end header of the issue, through each classifier.
        #expect(
            PushOutcome.apns(status: 429, reason: "TooManyRequests", retryAfter: "10000000000000000", apnsID: nil)
                == .retry(reason: "TooManyRequests", retryAfter: RetryAfter.ceiling)
        )
        #expect(PushOutcome.fcm(status: 503, body: [], retryAfter: "10000000000000000") == .retry(reason: "HTTP 503", retryAfter: RetryAfter.ceiling))
        // A 410 whose timestamp is no plausible time is dead without a date (a date is stored with the delivery).
        for stamp in ["1e308", "\"1e400\"", "\"inf\"", "\"NaN\"", "-5", "9223372036854775807", "\"-1e300\""] {
            let body = Array(#"{"reason":"Unregistered","timestamp":\#(stamp)}"#.utf8)
            let outcome = PushOutcome.apns(status: 410, body: body, retryAfter: nil, apnsID: nil, now: Self.now)
            #expect(outcome == .deadToken(reason: "Unregistered"), "\(stamp)")
        }
        let real = Array(#"{"reason":"Unregistered","timestamp":1793999999000}"#.utf8)
        #expect(
            PushOutcome.apns(status: 410, body: real, retryAfter: nil, apnsID: nil, now: Self.now)
                == .deadToken(reason: "Unregistered", since: Date(timeIntervalSince1970: 1_793_999_999))
        )
    }

    @Test("a webhook signature timestamp at the extremes, and a NaN or huge tolerance setting, give 401 invalid_signature, never a trap")
    func signatureTimestamps() {
        let body = ByteBuffer(string: "{}")
        for tolerance in [300, Double.nan, .infinity, 1e300, -5] {
            let signature = WebhookSignature(secret: "signing-secret-0123456789", tolerance: tolerance)
            for timestamp in ["9223372036854775807", "-9223372036854775808", "99999999999999999999", "1e400", "NaN", "", "+0", "-0"] {
                #expect(throws: APIError.self, "\(timestamp) with tolerance \(tolerance)") {
                    try signature.verify(signature: "AAAA", timestamp: timestamp, body: body, now: Self.now)
                }
            }
        }
    }

    /// A body: random bytes, a giant one, or JSON shaped like a provider's error with extreme values.
    static func body(_ generator: inout SeededGenerator, numbers: [String]) -> [UInt8] {
        func number() -> String { numbers.randomElement(using: &generator)! }
        // One body in a hundred is giant (a debug build parses it slowly); the rest are small and varied.
        let draw = Int.random(in: 0..<500, using: &generator)
        switch draw < 495 ? draw % 5 : 5 {
        case 0:
            return []
        case 1:
            return (0..<Int.random(in: 0..<200, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        case 2:
            return Array(#"{"reason":"Unregistered","timestamp":\#(number())}"#.utf8)
        case 3:
            return Array(#"{"reason":"TooManyRequests","timestamp":"\#(number())"}"#.utf8)
        case 4:
            let code = ["UNAVAILABLE", "QUOTA_EXCEEDED", "UNREGISTERED", "INVALID_ARGUMENT", "X"].randomElement(using: &generator)!
            return Array(#"{"error":{"code":\#(number()),"status":"\#(code)","details":[{"errorCode":"\#(code)","retryDelay":\#(number())}]}}"#.utf8)
        default:
            // A giant body (about 1 MB): a long array of huge numbers, then nesting deeper than the parser allows.
            let huge = ["1e400", "-9223372036854775809", "18446744073709551616", String(repeating: "9", count: 400)].randomElement(using: &generator)!
            let count = 1_000_000 / (huge.utf8.count + 1)
            let list = Array(repeating: huge, count: count).joined(separator: ",")
            return Array(("{\"reason\":[" + list + "],\"a\":" + String(repeating: "[", count: 600)).utf8)
        }
    }
}
