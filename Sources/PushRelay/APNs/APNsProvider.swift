import CurlHTTP2
import Foundation

/// APNs over HTTP/2: token authentication (ES256 provider tokens) or a client certificate.
struct APNsProvider: PushProvider {
    let settings: APNsSettings
    let client: HTTP2Client
    let tokens: APNsTokenManager?
    let pushTTL: Duration
    let timeout: Duration
    /// The app's `push` settings, as of the last reload.
    var presentation = PushPresentation()
    /// Opens devices' push keys for `encrypted` apps.
    var deviceKeys = DevicePushKeys()

    /// Sends to the host of the device's environment, or of the app's when the device was
    /// registered without one. APNs answers `BadDeviceToken` for a token of the other environment
    /// (a development build's token sent to production, say), so for such a device that answer is
    /// checked once against the other environment's host before the token counts as dead; the
    /// environment that accepted it is reported with the delivery. With `url` (one host for
    /// everything) there is no other host to ask. Everything happens within `deadline`: the other
    /// host is asked only while the time left covers a request timeout, else a later claim retries.
    func send(_ delivery: ClaimedDelivery, deadline: SendDeadline) async -> PushOutcome {
        let isSync = delivery.kind == .badgeSync
        let body =
            isSync
            ? APNsPayload.badgeSync(badge: delivery.badge ?? 0)
            : APNsPayload.alert(
                ReplyText.make(for: delivery, presentation: presentation, keys: deviceKeys),
                badge: delivery.badge,
                ticketID: delivery.ticketID,
                notificationID: delivery.notificationID,
                presentation: presentation
            )
        let known = delivery.environment.flatMap(APNsSettings.Environment.init(rawValue:))
        let first = known ?? settings.environment
        let outcome = await send(delivery, body: body, isSync: isSync, to: first, deadline: deadline)
        guard known == nil, settings.url == nil, case .deadToken("BadDeviceToken", _) = outcome else { return outcome }
        let other: APNsSettings.Environment = first == .production ? .sandbox : .production
        // Not dead yet (it may belong to the other environment), and no time to ask there.
        guard deadline.allowsAnotherRequest else {
            return .outOfTime("the \(other.rawValue) environment", after: "BadDeviceToken")
        }
        switch await send(delivery, body: body, isSync: isSync, to: other, deadline: deadline) {
        case .delivered(let providerID, _):
            return .delivered(providerID: providerID, environment: other.rawValue)
        case .deadToken:
            return outcome
        case let answer:
            return answer
        }
    }

    /// One push of `body` to `environment`'s host, with one provider-token refresh on
    /// ExpiredProviderToken when the deadline leaves time for it.
    private func send(
        _ delivery: ClaimedDelivery,
        body: [UInt8],
        isSync: Bool,
        to environment: APNsSettings.Environment,
        deadline: SendDeadline
    ) async -> PushOutcome {
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
            guard deadline.allowsRequest else { return .outOfTime("the APNs request", after: nil) }
            let headers = APNsHeaders.make(
                type: isSync ? .background : .alert,
                topic: settings.topic,
                bearer: bearer,
                ticketID: isSync ? nil : delivery.ticketID,
                expiration: Date().addingTimeInterval(pushTTL.timeInterval),
                apnsID: UUID.unique()
            )
            let response: HTTP2Response
            do {
                response = try await client.send(
                    HTTP2Request(
                        url: base + APNsHeaders.devicePath(token: delivery.token),
                        headers: headers,
                        body: body,
                        timeout: deadline.timeout(timeout)
                    )
                )
            } catch {
                return .transportFailure(error)
            }
            let outcome = PushOutcome.apns(
                status: response.status,
                body: response.body,
                retryAfter: response.header("retry-after"),
                apnsID: response.header("apns-id")
            )
            if case .credential(let reason, let refresh) = outcome, response.status == 403, let tokens, let bearer {
                // Any 403 retires the token: a key replaced under the same id, or a token another
                // instance signed with a bad key, is not reused for the rest of its hour. (Not 429
                // TooManyProviderTokenUpdates, which a new token would only make worse.)
                await tokens.rejected(bearer)
                // ExpiredProviderToken: sign a new token and try once more, if the lease leaves time for it.
                if refresh && !refreshed {
                    guard deadline.allowsAnotherRequest else {
                        return .outOfTime("a request with a new provider token", after: reason)
                    }
                    refreshed = true
                    continue
                }
            }
            return outcome
        }
    }
}
