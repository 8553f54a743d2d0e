import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Mustache
import NIOCore
import Synchronization

/// `console.*` keys.
public struct ConsoleSettings: Sendable {
    /// Serve the console at `/console` (default true).
    public var enabled: Bool
    /// A session unused this long ends (default 30 minutes).
    public var idleTimeout: Duration
    /// A session ends this long after sign-in (default 12 hours).
    public var sessionLifetime: Duration
    /// `auto` (default): the session cookie is `Secure` (and `__Host-` prefixed) when the request
    /// came over TLS (its scheme, or `X-Forwarded-Proto: https` from one of `http.trusted_proxies`);
    /// `always` or `never` override.
    public var secureCookies: String

    public init(config: ConfigReader) {
        enabled = config.bool(forKey: "enabled", default: true)
        idleTimeout = .seconds(max(60, config.int(forKey: "idle_timeout_seconds", default: 1800)))
        sessionLifetime = .seconds(max(300, config.int(forKey: "session_lifetime_seconds", default: 43_200)))
        secureCookies = config.string(forKey: "secure_cookies", default: "auto")
    }
}

/// The operator console: server-rendered pages at `/console` for the people who run the relay.
///
/// Sign-in exchanges an API key for a session (``ConsoleSessionStore``). Every page reads its data,
/// and every action writes it, through the relay's own HTTP API: the console sends the API request
/// through the router, with the visitor's session cookie (and, for a form, its CSRF token), so the
/// API's authentication, scopes, validation and logging apply unchanged. The console has no query
/// of its own.
final class ConsoleController: Sendable {
    let keys: APIKeyStore
    let sessions: ConsoleSessionStore
    let settings: ConsoleSettings
    /// Whose `X-Forwarded-Proto` counts (`http.trusted_proxies`).
    let trustedProxies: TrustedProxies
    let pages: ConsolePages
    /// The router's responder, for the API requests the console makes (set once routes are added).
    private let responder = Mutex<RouterResponder<AppRequestContext>?>(nil)

    init(keys: APIKeyStore, sessions: ConsoleSessionStore, settings: ConsoleSettings, trustedProxies: TrustedProxies = .none) throws {
        self.keys = keys
        self.sessions = sessions
        self.settings = settings
        self.trustedProxies = trustedProxies
        self.pages = try ConsolePages()
    }

    /// Adds the console's routes (HTML, not part of the OpenAPI document) to `router`.
    func addRoutes(to router: Router<AppRequestContext>) {
        router.get("/console", use: overview)
        router.get("/console/login", use: loginForm)
        router.post("/console/login", use: login)
        router.post("/console/logout", use: logout)
        router.get("/console/find", use: find)
        router.get("/console/devices", use: devices)
        router.get("/console/devices/unregister", use: confirmUnregister)
        router.post("/console/devices/unregister", use: unregister)
        router.get("/console/jobs", use: jobs)
        router.post("/console/jobs/{id}/cancel", use: cancelJob)
        router.get("/console/apps", use: appsPage)
        router.get("/console/static/console.css") { _, _ in ConsolePages.asset(ConsoleAssets.css, type: "text/css; charset=utf-8") }
        router.get("/console/static/console.js") { _, _ in ConsolePages.asset(ConsoleAssets.javascript, type: "text/javascript; charset=utf-8") }
    }

    /// Called once the router has every route.
    func use(_ responder: RouterResponder<AppRequestContext>) {
        self.responder.withLock { $0 = responder }
    }

    // MARK: Sign-in

    static let loginCookie = "pushrelay_login"

    @Sendable func loginForm(_ request: Request, context: AppRequestContext) async throws -> Response {
        if let token = Authenticator.sessionCookie(request), try await sessions.session(token: token) != nil {
            return Self.redirect("/console")
        }
        return loginPage(request, context: context, error: nil, status: .ok)
    }

    /// The form carries a random value that must equal the `pushrelay_login` cookie set with it
    /// (a login CSRF check: another site cannot sign a browser into its own key).
    private func loginPage(_ request: Request, context: AppRequestContext, error: String?, status: HTTPResponse.Status) -> Response {
        let check = ConsoleSessionStore.randomToken()
        var view: [String: Any] = ["title": "Sign in", "page": "login", "loginCheck": check]
        if let error { view["error"] = error }
        if request.uri.queryParameters["ended"] != nil && error == nil {
            view["flash"] = ["kind": "info", "text": "Your session has ended. Sign in again."]
        }
        var response = pages.html(template: "login", view: view, status: status)
        response.headers.append(HTTPField(name: .setCookie, value: cookie(Self.loginCookie, check, request: request, context: context, maxAge: 900)))
        return response
    }

    @Sendable func login(_ request: Request, context: AppRequestContext) async throws -> Response {
        let form = try await Self.form(request)
        let cookies = request.headers[values: .cookie].joined(separator: "; ")
        let expected = ConsoleSessionStore.cookie("__Host-" + Self.loginCookie, in: cookies)
            ?? ConsoleSessionStore.cookie(Self.loginCookie, in: cookies) ?? ""
        guard let check = form["login_check"], !expected.isEmpty, constantTimeEqual(Array(check.utf8), Array(expected.utf8)) else {
            return loginPage(request, context: context, error: "The sign-in form expired or came from another page. Try again.", status: .forbidden)
        }
        let presented = (form["key"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard let key = APIKey(presented: presented), let record = try await keys.verify(key) else {
            context.logger.notice("console sign-in refused: unknown or revoked API key")
            return loginPage(request, context: context, error: "Unknown or revoked API key.", status: .unauthorized)
        }
        let (token, _) = try await sessions.open(key: record)
        context.logger.notice("console sign-in", metadata: ["push.key": "\(record.prefix)", "push.app": "\(record.appID ?? "(admin)")"])
        var response = Self.redirect("/console")
        let lifetime = Int(settings.sessionLifetime.components.seconds)
        response.headers.append(
            HTTPField(name: .setCookie, value: cookie(ConsoleSessionStore.cookieName, token, request: request, context: context, maxAge: lifetime))
        )
        response.headers.append(HTTPField(name: .setCookie, value: cookie(Self.loginCookie, "", request: request, context: context, maxAge: 0)))
        return response
    }

    @Sendable func logout(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context, form: true) { visit in
            try await self.sessions.close(token: visit.token)
            var response = Self.redirect("/console/login")
            response.headers.append(
                HTTPField(name: .setCookie, value: self.cookie(ConsoleSessionStore.cookieName, "", request: request, context: context, maxAge: 0))
            )
            return response
        }
    }

    /// A cookie for the console: `HttpOnly`, `SameSite=Strict`, `Path=/` (the API under `/v1` reads
    /// it too), no `Domain`; when the request came over TLS (``isSecure(_:context:)``) also
    /// `Secure`, and named with the `__Host-` prefix, which browsers accept only with exactly these
    /// attributes, so no other host of the domain can set or overwrite it.
    func cookie(_ name: String, _ value: String, request: Request, context: AppRequestContext, maxAge: Int) -> String {
        let secure = isSecure(request, context: context)
        return "\(secure ? "__Host-" : "")\(name)=\(value); Path=/; HttpOnly; SameSite=Strict; Max-Age=\(maxAge)\(secure ? "; Secure" : "")"
    }

    static let forwardedProto = HTTPField.Name("X-Forwarded-Proto")!

    /// Whether the visitor's request came over TLS, as ``ConsoleSettings/secureCookies`` decides:
    /// its own scheme, or `X-Forwarded-Proto: https` on a connection from one of
    /// `http.trusted_proxies` (anyone else can send that header).
    func isSecure(_ request: Request, context: AppRequestContext) -> Bool {
        switch settings.secureCookies {
        case "always": return true
        case "never": return false
        default:
            if request.head.scheme?.lowercased() == "https" { return true }
            guard let forwarded = request.headers[Self.forwardedProto], trustedProxies.contains(context.channel.remoteAddress) else { return false }
            // A proxy chain may append: the last value is the one the trusted proxy set.
            let last = forwarded.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            return last == "https"
        }
    }

    // MARK: Pages

    @Sendable func overview(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context) { visit in
            var view = visit.view(title: "Overview", page: "overview")
            let ready = try await visit.api(.get, "/ready")
            view["readyText"] = ready.ok ? "ready" : "not ready: \(ready.errorMessage)"
            view["readyClass"] = ready.ok ? "ok" : "bad"
            view["schemaVersion"] = ready.object?["schema_version"].flatMap(Self.text) ?? "unknown"
            let answer = try await visit.api(.get, "/v1/overview")
            guard answer.ok else { return self.pages.html(template: "overview", view: view.merging(["error": answer.errorMessage]) { $1 }) }
            view["generatedAt"] = Self.time(answer.object?["generated_at"])
            view["apps"] = Self.objects(answer.object?["apps"]).map(Self.appOverview)
            return self.pages.html(template: "overview", view: view)
        }
    }

    static func appOverview(_ app: [String: Any]) -> [String: Any] {
        let minutes = objects(app["minutes"])
        // The last complete minute, as a per-second rate.
        let previous = minutes.count >= 2 ? minutes[minutes.count - 2] : [:]
        let rate = { (field: String) -> String in
            let perSecond = Double(number(previous[field]) ?? 0) / 60
            return String(format: perSecond < 10 ? "%.2f" : "%.0f", perSecond)
        }
        return [
            "app": text(app["app"]) ?? "",
            "webhookRate": rate("webhooks"), "pushRate": rate("delivered"),
            "lastHour": (app["last_hour"] as? [String: Any]) ?? [:],
            "queue": (app["queue"] as? [String: Any]) ?? [:],
            "zendeskBacklog": text(app["zendesk_backlog"]) ?? "0",
            "eventsBacklog": text(app["events_backlog"]) ?? "0",
        ]
    }

    @Sendable func find(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context) { visit in
            var view = visit.view(title: "Find", page: "find")
            let apps = try await visit.appIDs()
            let params = request.uri.queryParameters
            let app = params["app"].map(String.init) ?? apps.first ?? ""
            let by = params["by"].map(String.init) ?? "notification"
            let query = (params["q"].map(String.init) ?? "").trimmingCharacters(in: .whitespaces)
            view["appOptions"] = apps.map { ["id": $0, "selected": $0 == app] }
            view["byOptions"] = [("notification", "Notification id"), ("ticket", "Ticket id"), ("device", "Device token")].map {
                ["value": $0.0, "label": $0.1, "selected": $0.0 == by]
            }
            view["q"] = query
            guard !query.isEmpty, !app.isEmpty else { return self.pages.html(template: "find", view: view) }
            let base = "/v1/apps/\(Self.segment(app))"
            switch by {
            case "ticket":
                var path = "\(base)/tickets/\(Self.segment(query))/notifications?limit=20"
                if let cursor = params["cursor"] { path += "&cursor=\(Self.segment(String(cursor)))" }
                let answer = try await visit.api(.get, path)
                guard answer.ok else { view["error"] = answer.errorMessage; break }
                let list = Self.objects(answer.object?["notifications"]).map { Self.notification($0, app: app) }
                view["ticket"] = ["ticketID": query, "notifications": list, "empty": list.isEmpty]
                if let next = answer.object?["next"].flatMap(Self.text) {
                    view["nextPage"] = "/console/find?app=\(Self.segment(app))&by=ticket&q=\(Self.segment(query))&cursor=\(next)"
                }
            case "device":
                var path = "\(base)/devices/\(Self.segment(query))/deliveries?limit=50"
                if let cursor = params["cursor"] { path += "&cursor=\(Self.segment(String(cursor)))" }
                let answer = try await visit.api(.get, path)
                guard answer.ok else { view["error"] = answer.errorMessage; break }
                let list = Self.objects(answer.object?["deliveries"]).map(Self.delivery)
                view["device"] = ["deliveries": list, "empty": list.isEmpty]
                if let next = answer.object?["next"].flatMap(Self.text) {
                    view["nextPage"] = "/console/find?app=\(Self.segment(app))&by=device&q=\(Self.segment(query))&cursor=\(next)"
                }
            default:
                let answer = try await visit.api(.get, "\(base)/notifications/\(Self.segment(query))")
                guard answer.ok, let object = answer.object else { view["error"] = answer.errorMessage; break }
                view["notification"] = Self.notification(object, app: app)
            }
            return self.pages.html(template: "find", view: view)
        }
    }

    static func notification(_ object: [String: Any], app: String) -> [String: Any] {
        let counts = (object["counts"] as? [String: Any] ?? [:]).compactMap { status, count -> [String: Any]? in
            guard let count = number(count), count > 0 else { return nil }
            return ["status": status, "count": count]
        }.sorted { ($0["status"] as! String) < ($1["status"] as! String) }
        let id = text(object["id"]) ?? ""
        return [
            "id": id, "ticketID": text(object["ticket_id"]) ?? "", "title": text(object["title"]) ?? "",
            "createdAt": time(object["created_at"]), "counts": counts,
            "deliveries": objects(object["deliveries"]).map(delivery),
            "link": "/console/find?app=\(segment(app))&by=notification&q=\(id)",
            "ticketLink": "/console/find?app=\(segment(app))&by=ticket&q=\(segment(text(object["ticket_id"]) ?? ""))",
        ]
    }

    /// One delivery as a timeline: queued, the attempts with the last reason, the outcome.
    static func delivery(_ object: [String: Any]) -> [String: Any] {
        let status = text(object["status"]) ?? ""
        let attempts = number(object["attempts"]) ?? 0
        var view: [String: Any] = [
            "id": text(object["id"]) ?? "", "status": status, "platform": text(object["platform"]) ?? "",
            "token": text(object["token"]) ?? "", "kind": (text(object["kind"]) ?? "alert").replacingOccurrences(of: "_", with: " "),
            "createdAt": time(object["created_at"]), "updatedAt": time(object["updated_at"]),
            "final": !["pending", "sending"].contains(status),
        ]
        if attempts > 0 { view["attempts"] = attempts == 1 ? "1 attempt" : "\(attempts) attempts" }
        if let reason = text(object["last_reason"]) { view["reason"] = reason }
        if let provider = text(object["provider_id"]) { view["providerID"] = provider }
        if let delivered = object["delivered_at"], !(delivered is NSNull) { view["deliveredAt"] = time(delivered) }
        if let notification = text(object["notification_id"]) { view["notificationID"] = notification }
        return view
    }

    @Sendable func devices(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context) { visit in
            var view = visit.view(title: "Devices", page: "devices")
            let apps = try await visit.appIDs()
            let params = request.uri.queryParameters
            let app = params["app"].map(String.init) ?? apps.first ?? ""
            let by = params["by"].map(String.init) ?? "token"
            let query = (params["q"].map(String.init) ?? "").trimmingCharacters(in: .whitespaces)
            view["appOptions"] = apps.map { ["id": $0, "selected": $0 == app] }
            view["byOptions"] = [("token", "Device token"), ("user", "User id")].map { ["value": $0.0, "label": $0.1, "selected": $0.0 == by] }
            view["q"] = query
            if params["done"] == "unregistered" { view["flash"] = ["kind": "ok", "text": "The device was unregistered."] }
            guard !query.isEmpty, !app.isEmpty else { return self.pages.html(template: "devices", view: view) }
            let base = "/v1/apps/\(Self.segment(app))"
            var found: [[String: Any]] = []
            var owner: String?
            if by == "user" {
                let answer = try await visit.api(.get, "\(base)/users/\(Self.segment(query))/devices")
                if answer.ok { found = Self.objects(answer.object?["devices"]) } else { view["error"] = answer.errorMessage }
                owner = query
            } else {
                let answer = try await visit.api(.get, "\(base)/devices/\(Self.segment(query))")
                if answer.ok, let device = answer.object {
                    found = [device]
                    owner = Self.text(device["user_id"]) ?? Self.text(device["token"])
                } else if answer.status == .notFound {
                    view["notFound"] = true
                } else {
                    view["error"] = answer.errorMessage
                }
            }
            view["devices"] = found.map { device -> [String: Any] in
                let token = Self.text(device["token"]) ?? ""
                let status = Self.text(device["status"]) ?? "active"
                var entry: [String: Any] = [
                    "token": token, "tokenShort": Redaction.token(token), "platform": Self.text(device["platform"]) ?? "",
                    "user": Self.text(device["user_id"]) ?? "(none)", "status": status, "active": status == "active",
                    "updatedAt": Self.time(device["updated_at"]), "locale": Self.text(device["locale"]) ?? "",
                    "unregisterLink": "/console/devices/unregister?app=\(Self.segment(app))&token=\(Self.segment(token))",
                ]
                if let reason = Self.text(device["invalid_reason"]) { entry["reason"] = reason }
                return entry
            }
            view["searched"] = true
            if let owner, !found.isEmpty || by == "user" {
                let unread = try await visit.api(.get, "\(base)/users/\(Self.segment(owner))/unread")
                if unread.ok {
                    view["unread"] = [
                        "owner": owner.utf8.count >= 32 ? Redaction.token(owner) : owner,
                        "total": Self.text(unread.object?["total"]) ?? "0",
                        "tickets": Self.objects(unread.object?["tickets"]).map { ["ticket": Self.text($0["ticket_id"]) ?? "", "unread": Self.text($0["unread"]) ?? "0"] },
                    ]
                } else {
                    view["unreadError"] = unread.errorMessage
                }
            }
            return self.pages.html(template: "devices", view: view)
        }
    }

    @Sendable func confirmUnregister(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context) { visit in
            var view = visit.view(title: "Unregister a device", page: "devices")
            let app = request.uri.queryParameters["app"].map(String.init) ?? ""
            let token = request.uri.queryParameters["token"].map(String.init) ?? ""
            view["app"] = app
            view["token"] = token
            view["tokenShort"] = Redaction.token(token)
            view["back"] = "/console/devices?app=\(Self.segment(app))&by=token&q=\(Self.segment(token))"
            return self.pages.html(template: "unregister", view: view)
        }
    }

    @Sendable func unregister(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context, form: true) { visit in
            let app = visit.form["app"] ?? ""
            let token = visit.form["token"] ?? ""
            let answer = try await visit.api(.delete, "/v1/apps/\(Self.segment(app))/devices/\(Self.segment(token))")
            guard answer.ok else {
                var view = visit.view(title: "Unregister a device", page: "devices")
                view.merge(["app": app, "token": token, "tokenShort": Redaction.token(token), "error": answer.errorMessage]) { $1 }
                view["back"] = "/console/devices?app=\(Self.segment(app))&by=token&q=\(Self.segment(token))"
                return self.pages.html(template: "unregister", view: view, status: answer.status)
            }
            return Self.redirect("/console/devices?app=\(Self.segment(app))&by=token&q=\(Self.segment(token))&done=unregistered")
        }
    }

    @Sendable func jobs(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context) { visit in
            var view = visit.view(title: "Jobs", page: "jobs")
            view["appOptions"] = try await visit.appIDs().map { ["id": $0] }
            let answer = try await visit.api(.get, "/v1/admin/jobs?limit=20")
            if answer.ok {
                view["jobs"] = Self.objects(answer.object?["jobs"]).map(Self.job)
                view["admin"] = true
            } else {
                view["error"] = answer.errorMessage
            }
            if request.uri.queryParameters["done"] == "cancelled" { view["flash"] = ["kind": "ok", "text": "The job was cancelled."] }
            return self.pages.html(template: "jobs", view: view)
        }
    }

    static func job(_ object: [String: Any]) -> [String: Any] {
        let status = text(object["status"]) ?? ""
        let total = number(object["total"]) ?? 0
        let processed = number(object["processed"]) ?? 0
        var view: [String: Any] = [
            "id": text(object["id"]) ?? "", "app": text(object["app_id"]) ?? "", "status": status, "total": total, "processed": processed,
            "removed": number(object["removed"]) ?? 0, "notFound": number(object["not_found"]) ?? 0, "failed": number(object["failed"]) ?? 0,
            "forwarded": number(object["forwarded"]) ?? 0, "createdAt": time(object["created_at"]),
            "percent": total > 0 ? processed * 100 / total : 0, "cancellable": status == "queued" || status == "running",
        ]
        if let error = text(object["error"]) { view["error"] = error }
        return view
    }

    @Sendable func cancelJob(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context, form: true) { visit in
            let id = try context.parameters.require("id")
            let answer = try await visit.api(.post, "/v1/admin/jobs/\(Self.segment(id))/cancel")
            guard answer.ok else { return self.pages.message(visit, title: "Jobs", page: "jobs", text: answer.errorMessage, status: answer.status) }
            return Self.redirect("/console/jobs?done=cancelled")
        }
    }

    @Sendable func appsPage(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context) { visit in
            var view = visit.view(title: "Apps", page: "apps")
            let answer = try await visit.api(.get, "/v1/apps")
            guard answer.ok else { return self.pages.html(template: "apps", view: view.merging(["error": answer.errorMessage]) { $1 }) }
            view["apps"] = Self.objects(answer.object?["apps"]).map(Self.appView)
            return self.pages.html(template: "apps", view: view)
        }
    }

    static func appView(_ object: [String: Any]) -> [String: Any] {
        var settings: [[String: Any]] = []
        let add = { (label: String, value: String?) in if let value { settings.append(["label": label, "value": value]) } }
        add("Webhook secrets", (object["webhook_secrets"] as? [Any])?.compactMap(text).joined(separator: ", "))
        add("Webhook signing secret", text(object["webhook_signing_secret"]))
        add("User tokens (key file)", (object["user_tokens"] as? [String: Any])?["secret_file"].flatMap(text))
        for (section, label) in [("apns", "APNs"), ("fcm", "FCM"), ("zendesk", "Zendesk")] {
            guard let fields = object[section] as? [String: Any] else { continue }
            for (key, value) in fields.sorted(by: { $0.key < $1.key }) { add("\(label) \(key.replacingOccurrences(of: "_", with: " "))", text(value)) }
        }
        if let events = object["events"] as? [String: Any] {
            add("Events URL", text(events["url"]))
            add("Events types", (events["types"] as? [Any])?.compactMap(text).joined(separator: ", "))
            add("Events signing secret file", text(events["signing_secret_file"]))
        }
        let credentials = objects(object["credentials"]).map { credential -> [String: Any] in
            var view: [String: Any] = [
                "platform": text(credential["platform"]) ?? "", "kind": (text(credential["kind"]) ?? "").replacingOccurrences(of: "_", with: " "),
                "lastRefresh": credential["last_refresh"].map(time) ?? "", "expiresAt": credential["expires_at"].map(time) ?? "",
            ]
            if view["lastRefresh"] as? String == "" { view["lastRefresh"] = "never (no push sent yet)" }
            if let rejection = credential["last_rejection"] as? [String: Any] {
                view["rejection"] = ["at": time(rejection["at"]), "reason": text(rejection["reason"]) ?? ""]
            }
            return view
        }
        return ["id": text(object["id"]) ?? "", "settings": settings, "credentials": credentials]
    }

    // MARK: Sessions and API calls

    /// A signed-in visit: the session, and the API as this session.
    struct Visit: Sendable {
        let token: String
        let session: ConsoleSessionStore.Session
        let form: [String: String]
        let responder: RouterResponder<AppRequestContext>
        let context: AppRequestContext

        /// The layout's values: the navigation, who is signed in, the CSRF token.
        func view(title: String, page: String) -> [String: Any] {
            let who: String
            switch session.principal {
            case .admin: who = "admin key \(session.keyPrefix)"
            case .app(let id, _): who = "app key \(session.keyPrefix) (\(id))"
            case .user: who = ""
            }
            let nav = [("overview", "Overview", "/console"), ("find", "Find", "/console/find"), ("devices", "Devices", "/console/devices"),
                       ("jobs", "Jobs", "/console/jobs"), ("apps", "Apps", "/console/apps")]
            return [
                "title": title, "page": page, "signedIn": true, "who": who, "csrf": session.csrfToken,
                "nav": nav.map { ["href": $0.2, "label": $0.1, "current": $0.0 == page] },
            ]
        }

        /// The app ids this session may look at (`GET /v1/apps`).
        func appIDs() async throws -> [String] {
            let answer = try await api(.get, "/v1/apps")
            return ConsoleController.objects(answer.object?["apps"]).compactMap { ConsoleController.text($0["id"]) }
        }

        /// Sends an API request through the router as this session.
        func api(_ method: HTTPRequest.Method, _ path: String, body: ByteBuffer? = nil) async throws -> APIAnswer {
            var fields = HTTPFields()
            fields[.cookie] = "\(ConsoleSessionStore.cookieName)=\(token)"
            if method != .get { fields[Authenticator.csrfHeader] = session.csrfToken }
            if body != nil { fields[.contentType] = "application/json" }
            let head = HTTPRequest(method: method, scheme: "http", authority: "console", path: path, headerFields: fields)
            let request = Request(head: head, body: RequestBody(buffer: body ?? ByteBuffer()))
            let inner = AppRequestContext(source: ApplicationRequestContextSource(channel: context.channel, logger: context.logger))
            let response = try await responder.respond(to: request, context: inner)
            let collector = BodyCollector()
            try await response.body.write(collector)
            return APIAnswer(status: response.status, bytes: collector.bytes)
        }
    }

    struct APIAnswer: Sendable {
        var status: HTTPResponse.Status
        var bytes: [UInt8]

        var ok: Bool { (200..<300).contains(status.code) }
        var object: [String: Any]? {
            guard !bytes.isEmpty else { return nil }
            return (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]
        }
        /// The API's error message (`{"error":{"message":…}}`), or the status.
        var errorMessage: String {
            if let error = object?["error"] as? [String: Any], let message = error["message"] as? String { return message }
            return "HTTP \(status.code)"
        }
    }

    /// Collects a response body (the API's answers are small JSON documents).
    final class BodyCollector: ResponseBodyWriter, @unchecked Sendable {
        var bytes: [UInt8] = []
        func write(_ buffer: ByteBuffer) async throws { bytes += buffer.readableBytesView }
        func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }

    /// Runs `page` for a signed-in visitor; without a live session, sends them to sign in. A form
    /// (`form: true`) must carry the session's CSRF token as `csrf_token`, or gets 403.
    private func withSession(
        _ request: Request, context: AppRequestContext, form: Bool = false, _ page: (Visit) async throws -> Response
    ) async throws -> Response {
        guard let token = Authenticator.sessionCookie(request), let session = try await sessions.session(token: token) else {
            return Self.redirect(Authenticator.sessionCookie(request) == nil ? "/console/login" : "/console/login?ended=1")
        }
        guard let responder = responder.withLock({ $0 }) else { throw APIError(.serviceUnavailable, code: "starting", message: "the console is starting") }
        var fields: [String: String] = [:]
        if form {
            fields = try await Self.form(request)
            let presented = fields["csrf_token"] ?? ""
            guard constantTimeEqual(Array(presented.utf8), Array(session.csrfToken.utf8)) else {
                context.logger.notice("console form refused: missing or wrong CSRF token")
                let visit = Visit(token: token, session: session, form: [:], responder: responder, context: context)
                return pages.message(
                    visit, title: "Refused", page: "", text: "This form is missing its CSRF token or carries a wrong one; reload the page and try again.",
                    status: .forbidden
                )
            }
        }
        return try await page(Visit(token: token, session: session, form: fields, responder: responder, context: context))
    }

    // MARK: Helpers

    static func redirect(_ location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
    }

    /// An `application/x-www-form-urlencoded` body (at most 64 KiB).
    static func form(_ request: Request) async throws -> [String: String] {
        let type = (request.headers[.contentType] ?? "").lowercased()
        guard type.hasPrefix("application/x-www-form-urlencoded") else { return [:] }
        let buffer = try await request.body.collect(upTo: 64 * 1024)
        var fields: [String: String] = [:]
        for pair in String(buffer: buffer).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (text: Substring) in String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            fields[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }

    /// A path segment or query value, percent-encoded (unreserved characters kept).
    static func segment(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)..<Unicode.Scalar(128)))
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    static func objects(_ value: Any?) -> [[String: Any]] {
        (value as? [Any])?.compactMap { $0 as? [String: Any] } ?? []
    }

    static func text(_ value: Any?) -> String? {
        switch value {
        case let string as String: return string
        case let number as Int: return String(number)
        case let number as Int64: return String(number)
        // A whole number in range prints without a fraction; anything else (1e300, inf) as it is, never a trap.
        case let number as Double: return Int64(exactly: number).map(String.init) ?? String(number)
        case let number as NSNumber: return number.stringValue
        default: return nil
        }
    }

    static func number(_ value: Any?) -> Int? {
        switch value {
        case let number as Int: return number
        case let number as Int64: return Int(number)
        case let number as Double: return number.isFinite ? Int(exactly: number.rounded(.towardZero)) : nil
        case let number as NSNumber: return number.intValue
        default: return nil
        }
    }

    /// An ISO 8601 time from the API as shown: `2026-11-24 11:30:05 UTC`.
    static func time(_ value: Any?) -> String {
        guard let text = text(value) else { return "" }
        return text.replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: " UTC")
    }
}
