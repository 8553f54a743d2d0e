import CurlHTTP2
import Foundation

/// Sends one push to a provider and says what the answer means.
protocol PushProvider: Sendable {
    /// Sends `delivery`, all of it (token fetch, retries inside the send) within `deadline`: the
    /// delivery's lease ends soon after, and another claimer may then send it again.
    func send(_ delivery: ClaimedDelivery, deadline: SendDeadline) async -> PushOutcome
}

extension PushOutcome {
    /// The send's time ran out before `what` could start: the delivery is retried by a later claim.
    static func outOfTime(_ what: String, after reason: String?) -> PushOutcome {
        .retry(reason: (reason.map { "\($0); " } ?? "") + "no time left in the lease for \(what)", retryAfter: nil)
    }

    /// A failure below HTTP. A request the relay could not build (a header or URL curl refuses) is
    /// the push's own problem and fails it: nothing was sent, so no provider judged the
    /// credentials. A TLS set-up that fails on configuration (the provider's certificate does not
    /// verify, the client certificate cannot be used) is a problem of the app's connection
    /// settings, which waits without using up the delivery's attempts. Anything else (connection
    /// loss, GOAWAY, refused streams, timeouts, an answer curl cannot read) is retried with
    /// backoff and counts as an attempt, so a failure nobody foresaw still ends.
    static func transportFailure(_ error: any Error) -> PushOutcome {
        guard let error = error as? CurlError else { return .retry(reason: "transport: \(error)", retryAfter: nil) }
        if error.isRequestInvalid {
            return .unsendable(reason: "the relay could not build the request: \(error.message)")
        }
        if error.isTLSConfiguration {
            return .credential(reason: "transport: curl \(error.code): \(error.message)", refreshToken: false)
        }
        return .retry(reason: "transport: curl \(error.code): \(error.message)", retryAfter: nil)
    }
}
