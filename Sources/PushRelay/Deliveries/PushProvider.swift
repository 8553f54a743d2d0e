import CurlHTTP2
import Foundation

/// A delivery claimed by the dispatcher, with what is needed to build its push.
struct ClaimedDelivery: Sendable {
    var id: Int64
    var appID: String
    var token: String
    var platform: Platform
    /// `alert` (a reply) or `badge_sync` (a silent badge update after a read elsewhere).
    var kind: String
    /// Attempts including this one.
    var attempts: Int
    var createdAt: Date
    var ticketID: String
    var title: String
    var body: String
    /// The device's registered environment, when it has one (APNs host choice).
    var environment: String?
    /// False when the device was invalidated after the delivery was queued.
    var deviceActive: Bool
    /// The owner's total unread count, when counters exist.
    var badge: Int?
    /// Taken just before the statement that claimed the row: its lease ends no earlier than this
    /// plus the lease.
    var claimedAt: ContinuousClock.Instant
}

/// Sends one push to a provider and says what the answer means.
protocol PushProvider: Sendable {
    func send(_ delivery: ClaimedDelivery) async -> PushOutcome
}

/// APNs over HTTP/2: token authentication (ES256 provider tokens) or a client certificate.
struct APNsProvider: PushProvider {
    let settings: APNsSettings
    let client: HTTP2Client
    let tokens: APNsTokenManager?
    let pushTTL: Duration
    let timeout: Duration

    /// Sends to the host of the device's environment, or of the app's when the device was
    /// registered without one. APNs answers `BadDeviceToken` for a token of the other environment
    /// (a development build's token sent to production, say), so for such a device that answer is
    /// checked once against the other environment's host before the token counts as dead; the
    /// environment that accepted it is reported with the delivery. With `url` (one host for
    /// everything) there is no other host to ask.
    func send(_ delivery: ClaimedDelivery) async -> PushOutcome {
        let isSync = delivery.kind == "badge_sync"
        let body =
            isSync
            ? APNsPayload.badgeSync(badge: delivery.badge ?? 0)
            : APNsPayload.alert(title: delivery.title, body: delivery.body, badge: delivery.badge, ticketID: delivery.ticketID)
        let known = delivery.environment.flatMap(APNsSettings.Environment.init(rawValue:))
        let first = known ?? settings.environment
        let outcome = await send(delivery, body: body, isSync: isSync, to: first)
        guard known == nil, settings.url == nil, case .deadToken("BadDeviceToken", _) = outcome else { return outcome }
        let other: APNsSettings.Environment = first == .production ? .sandbox : .production
        switch await send(delivery, body: body, isSync: isSync, to: other) {
        case .delivered(let providerID, _):
            return .delivered(providerID: providerID, environment: other.rawValue)
        case .deadToken:
            return outcome
        case let answer:
            return answer
        }
    }

    /// One push of `body` to `environment`'s host, with one provider-token refresh on ExpiredProviderToken.
    private func send(_ delivery: ClaimedDelivery, body: [UInt8], isSync: Bool, to environment: APNsSettings.Environment) async -> PushOutcome {
        let base = settings.baseURL(for: environment)
        var refreshed = false
        while true {
            var bearer: String?
            if let tokens {
                do {
                    bearer = try await tokens.token()
                } catch {
                    return .credential(reason: "cannot sign the APNs provider token", refreshToken: false)
                }
            }
            let headers = APNsHeaders.make(
                type: isSync ? .background : .alert, topic: settings.topic, bearer: bearer, ticketID: isSync ? nil : delivery.ticketID,
                expiration: Date().addingTimeInterval(pushTTL.timeInterval), apnsID: UUID.random()
            )
            let response: HTTP2Response
            do {
                response = try await client.send(
                    HTTP2Request(url: base + APNsHeaders.devicePath(token: delivery.token), headers: headers, body: body, timeout: timeout)
                )
            } catch {
                return .transportFailure(error)
            }
            // Error answers carry `{"reason":…}`, a 410 also `"timestamp"` in milliseconds; a 200 has no body.
            let error = response.body.isEmpty ? nil : (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
            let milliseconds = (error?["timestamp"] as? NSNumber)?.doubleValue ?? (error?["timestamp"] as? String).flatMap(Double.init)
            let outcome = PushOutcome.apns(
                status: response.status, reason: error?["reason"] as? String, retryAfter: response.header("retry-after"),
                apnsID: response.header("apns-id"), timestamp: milliseconds.map { Date(timeIntervalSince1970: $0 / 1000) }
            )
            if case .credential(_, refreshToken: true) = outcome, !refreshed, let tokens, let bearer {
                // ExpiredProviderToken: sign a new token and try once more.
                await tokens.expired(bearer)
                refreshed = true
                continue
            }
            return outcome
        }
    }
}

/// FCM HTTP v1 with an OAuth2 access token from the service account.
struct FCMProvider: PushProvider {
    let settings: FCMSettings
    let projectID: String
    let client: HTTP2Client
    let tokens: FCMAccessTokenManager
    let pushTTL: Duration
    let timeout: Duration

    func send(_ delivery: ClaimedDelivery) async -> PushOutcome {
        let body =
            delivery.kind == "badge_sync"
            ? FCMMessage.badgeSync(token: delivery.token, unreadCount: delivery.badge ?? 0)
            : FCMMessage.reply(
                token: delivery.token, title: delivery.title, body: delivery.body, ticketID: delivery.ticketID, unreadCount: delivery.badge,
                ttl: pushTTL
            )
        let url = "\(settings.baseURL)/v1/projects/\(projectID)/messages:send"
        var refreshed = false
        while true {
            let bearer: String
            do {
                bearer = try await tokens.token()
            } catch let error as CurlError {
                return .transportFailure(error)
            } catch {
                return .credential(reason: "cannot get an FCM access token: \(error)", refreshToken: false)
            }
            let response: HTTP2Response
            do {
                response = try await client.send(
                    HTTP2Request(
                        url: url, headers: [("authorization", "Bearer \(bearer)"), ("content-type", "application/json")], body: body,
                        timeout: timeout
                    )
                )
            } catch {
                return .transportFailure(error)
            }
            let outcome = PushOutcome.fcm(status: response.status, body: response.body, retryAfter: response.header("retry-after"))
            if case .credential(_, refreshToken: true) = outcome, !refreshed {
                await tokens.rejected(bearer)
                refreshed = true
                continue
            }
            return outcome
        }
    }

    /// The OAuth exchange over the same HTTP/2 client.
    static func exchange(client: HTTP2Client, timeout: Duration) -> FCMAccessTokenManager.Exchange {
        { url, form in
            let response = try await client.send(
                HTTP2Request(
                    url: url, headers: [("content-type", "application/x-www-form-urlencoded")], body: Array(form.utf8), timeout: timeout
                )
            )
            return (response.status, response.body)
        }
    }
}

extension PushOutcome {
    /// A failure below HTTP. A request the relay could not build (a header or URL curl refuses) is
    /// the push's own problem and fails it: nothing was sent, so no provider judged the
    /// credentials. A TLS set-up that fails on configuration (the provider's certificate does not
    /// verify, the client certificate cannot be used) is a problem of the app's connection
    /// settings, which waits without using up the delivery's attempts. Anything else (connection
    /// loss, GOAWAY, refused streams, timeouts, an answer curl cannot read) is retried with
    /// backoff and counts as an attempt, so a failure nobody foresaw still ends.
    static func transportFailure(_ error: any Error) -> PushOutcome {
        guard let error = error as? CurlError else { return .retry(reason: "transport: \(error)", retryAfter: nil) }
        if error.isRequestInvalid { return .unsendable(reason: "the relay could not build the request: \(error.message)") }
        if error.isTLSConfiguration { return .credential(reason: "transport: curl \(error.code): \(error.message)", refreshToken: false) }
        return .retry(reason: "transport: curl \(error.code): \(error.message)", retryAfter: nil)
    }
}
