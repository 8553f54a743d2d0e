import Foundation
import Hummingbird

/// The status API: what happened to a notification's pushes, a ticket's notifications, and the
/// deliveries to one device. App keys with `notifications:read` (their app only) and admin keys.
///
/// Device tokens are shortened as in logs (first 6 and last 4 characters). `?tokens=full` shows
/// them whole to callers that may read the device registry anyway: admin keys and app keys that
/// also hold `devices:read`.
struct StatusController<Context: RequestContext>: Sendable {
    let store: DeliveryStatusStore
    let authenticator: Authenticator

    var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .get("/v1/apps/{app}/notifications/{id}", use: notification)
            .get("/v1/apps/{app}/tickets/{ticket}/notifications", use: ticketNotifications)
            .get("/v1/apps/{app}/devices/{token}/deliveries", use: deviceDeliveries)
    }

    /// A page of a list: `{"<name>":[…],"next":…}`, `next` the cursor of the next page or `null`
    /// on the last.
    struct Page<Item: Encodable & Sendable>: ResponseEncodable {
        var name: String
        var items: [Item]
        var next: String?

        private typealias Key = NamedCodingKey

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Key.self)
            try c.encode(items, forKey: Key(stringValue: name))
            try c.encode(next, forKey: Key(stringValue: "next"))
        }
    }

    /// `GET /v1/apps/{app}/notifications/{id}`.
    @Sendable func notification(_ request: Request, context: Context) async throws -> NotificationStatusRecord {
        let (app, principal) = try await authenticator.resolve(request, context: context)
        try principal.requireAppKey(app, scope: .notificationsRead)
        let full = try fullTokens(request, principal: principal, app: app)
        let raw = try context.pathParameter("id")
        // An id that is not a positive 64-bit integer names no notification.
        guard let id = Self.positiveID(Substring(raw)),
            let found = try await store.notification(app: app, id: id, fullTokens: full)
        else {
            throw APIError(.notFound, code: "notification_not_found", message: "no such notification in this app")
        }
        return found
    }

    /// `GET /v1/apps/{app}/tickets/{ticket}/notifications?limit=&cursor=`.
    @Sendable func ticketNotifications(
        _ request: Request,
        context: Context
    ) async throws -> Page<NotificationStatusRecord> {
        let (app, principal) = try await authenticator.resolve(request, context: context)
        try principal.requireAppKey(app, scope: .notificationsRead)
        let ticket = try InputRules.identifier(
            try context.pathParameter("ticket"),
            field: "ticket",
            maxBytes: InputRules.maxTicketBytes
        )
        let (limit, before) = try page(request)
        let (rows, more) = try await store.notifications(app: app, ticket: ticket, before: before, limit: limit)
        return Page(name: "notifications", items: rows, next: more ? rows.last.map { String($0.id) } : nil)
    }

    /// `GET /v1/apps/{app}/devices/{token}/deliveries?limit=&cursor=&tokens=`.
    @Sendable func deviceDeliveries(_ request: Request, context: Context) async throws -> Page<DeliveryStatusRecord> {
        let (app, principal) = try await authenticator.resolve(request, context: context)
        try principal.requireAppKey(app, scope: .notificationsRead)
        let full = try fullTokens(request, principal: principal, app: app)
        let lookup = try InputRules.deviceTokenForLookup(try context.pathParameter("token"))
        let (limit, before) = try page(request)
        let (rows, more) = try await store.deliveries(
            app: app,
            token: lookup,
            before: before,
            limit: limit,
            fullTokens: full
        )
        return Page(name: "deliveries", items: rows, next: more ? rows.last.map { String($0.id) } : nil)
    }

    // MARK: Helpers

    /// `limit` (1-500, default 50) and `cursor` (a `next` from the previous page).
    private func page(_ request: Request) throws -> (limit: Int, before: Int64?) {
        let limit = try InputRules.pageLimit(request.uri.queryParameters["limit"])
        guard let cursor = request.uri.queryParameters["cursor"] else { return (limit, nil) }
        guard let before = Self.pageCursor(cursor) else {
            throw JSONBody.invalidField("cursor", "must be the next value of a previous page")
        }
        return (limit, before)
    }

    /// A cursor as the served document admits it (`^[1-9][0-9]{0,18}$`): a page holds the ids below
    /// it, so a 19-digit value past `Int64.max` bounds nothing and reads as `Int64.max`.
    static func pageCursor(_ text: Substring) -> Int64? {
        if let id = positiveID(text) { return id }
        guard text.utf8.count == 19, text.utf8.first != 0x30, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return nil
        }
        return Int64.max
    }

    /// `tokens=full` or `tokens=short` (the default); full needs an admin key or `devices:read`.
    private func fullTokens(_ request: Request, principal: Principal, app: String) throws -> Bool {
        switch request.uri.queryParameters["tokens"] {
        case nil, "short": return false
        case "full":
            try principal.requireAppKey(app, scope: .devicesRead)
            return true
        default:
            throw JSONBody.invalidField("tokens", "must be \"short\" or \"full\"")
        }
    }

    /// A positive decimal 64-bit integer of at most 19 digits.
    static func positiveID(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 19, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let value = Int64(text), value > 0
        else {
            return nil
        }
        return value
    }
}

extension NotificationStatusRecord: ResponseEncodable {}
