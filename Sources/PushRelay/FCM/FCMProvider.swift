import CurlHTTP2
import Foundation

/// FCM HTTP v1 with an OAuth2 access token from the service account.
struct FCMProvider: PushProvider {
    let settings: FCMSettings
    let projectID: String
    let client: HTTP2Client
    let tokens: FCMAccessTokenManager
    let pushTTL: Duration
    let timeout: Duration
    /// The app's `push` settings, as of the last reload.
    var presentation = PushPresentation()
    /// Opens devices' push keys for `encrypted` apps.
    var deviceKeys = DevicePushKeys()

    /// Sends with an access token, and once more with a new one when FCM answers UNAUTHENTICATED,
    /// all within `deadline`: the second request (and its token fetch) only while the time left
    /// covers a request timeout, and every request's timeout no longer than the time left.
    func send(_ delivery: ClaimedDelivery, deadline: SendDeadline) async -> PushOutcome {
        let body =
            delivery.kind == .badgeSync
            ? FCMMessage.badgeSync(token: delivery.token, unreadCount: delivery.badge ?? 0)
            : FCMMessage.reply(
                token: delivery.token,
                text: ReplyText.make(for: delivery, presentation: presentation, keys: deviceKeys),
                ticketID: delivery.ticketID,
                unreadCount: delivery.badge,
                notificationID: delivery.notificationID,
                ttl: pushTTL,
                presentation: presentation
            )
        let url = "\(settings.baseURL)/v1/projects/\(projectID)/messages:send"
        var refreshed = false
        while true {
            let bearer: String
            do {
                // The token fetch's own request is bounded by the deadline too (see ``exchange(client:timeout:)``).
                bearer = try await SendDeadline.$current.withValue(deadline) { try await tokens.token() }
            } catch let error as CurlError {
                return .transportFailure(error)
            } catch {
                return .credential(reason: "cannot get an FCM access token: \(error)", refreshToken: false)
            }
            guard deadline.allowsRequest else { return .outOfTime("the FCM request", after: nil) }
            let response: HTTP2Response
            do {
                response = try await client.send(
                    HTTP2Request(
                        url: url,
                        headers: [("authorization", "Bearer \(bearer)"), ("content-type", "application/json")],
                        body: body,
                        timeout: deadline.timeout(timeout)
                    )
                )
            } catch {
                return .transportFailure(error)
            }
            let outcome = PushOutcome.fcm(
                status: response.status,
                body: response.body,
                retryAfter: response.header("retry-after")
            )
            if case .credential(let reason, let refresh) = outcome, response.status == 401 || response.status == 403 {
                // A refusal of the access token retires it (once per token, cluster-wide).
                await tokens.rejected(bearer)
                if refresh && !refreshed {
                    guard deadline.allowsAnotherRequest else {
                        return .outOfTime("a request with a new access token", after: reason)
                    }
                    refreshed = true
                    continue
                }
            }
            return outcome
        }
    }

    /// The OAuth exchange over the same HTTP/2 client. Made for a send, its timeout is no longer
    /// than the time the send has left (``SendDeadline/current``).
    static func exchange(client: HTTP2Client, timeout: Duration) -> FCMAccessTokenManager.Exchange {
        { url, form in
            let response = try await client.send(
                HTTP2Request(
                    url: url,
                    headers: [("content-type", "application/x-www-form-urlencoded")],
                    body: Array(form.utf8),
                    timeout: SendDeadline.current?.timeout(timeout) ?? timeout
                )
            )
            return (response.status, response.body)
        }
    }
}
