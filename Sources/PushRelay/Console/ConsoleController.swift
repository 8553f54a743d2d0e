import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Mustache
import NIOCore
import Synchronization

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
    /// Sign-ins per key and per client address (``ConsoleSettings/signInsPerKey``).
    let throttle: SignInThrottle
    /// The router's responder, for the API requests the console makes (set once routes are added).
    private let responder = Mutex<RouterResponder<AppRequestContext>?>(nil)

    init(
        keys: APIKeyStore,
        sessions: ConsoleSessionStore,
        settings: ConsoleSettings,
        trustedProxies: TrustedProxies = .none,
        clock: RelayClock = .system
    ) throws {
        self.keys = keys
        self.sessions = sessions
        self.settings = settings
        self.trustedProxies = trustedProxies
        self.pages = try ConsolePages()
        self.throttle = SignInThrottle(
            perKey: settings.signInsPerKey,
            perAddress: settings.signInsPerAddress,
            clock: clock
        )
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
        router.post("/console/apps/managed", use: saveManagedApp)
        router.post("/console/apps/managed/delete", use: deleteManagedApp)
        router.get("/console/static/console.css") { _, _ in
            ConsolePages.asset(EmbeddedAssets.console_css, type: "text/css; charset=utf-8")
        }
        router.get("/console/static/console.js") { _, _ in
            ConsolePages.asset(EmbeddedAssets.console_js, type: "text/javascript; charset=utf-8")
        }
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
    private func loginPage(
        _ request: Request,
        context: AppRequestContext,
        error: String?,
        status: HTTPResponse.Status
    ) -> Response {
        let check = ConsoleSessionStore.randomToken()
        var page = ConsoleView.ConsolePage(
            title: "Sign in",
            page: "login",
            error: error,
            view: ConsoleView.LoginView(loginCheck: check)
        )
        if request.uri.queryParameters["ended"] != nil && error == nil {
            page.flash = ConsoleView.Flash(kind: "info", text: "Your session has ended. Sign in again.")
        }
        var response = pages.html(template: "login", page: page, status: status)
        response.headers.append(
            HTTPField(
                name: .setCookie,
                value: cookie(Self.loginCookie, check, request: request, context: context, maxAge: 900)
            )
        )
        return response
    }

    @Sendable func login(_ request: Request, context: AppRequestContext) async throws -> Response {
        let form = try await ConsoleVisit.form(request)
        let cookies = request.headers[values: .cookie].joined(separator: "; ")
        let expected =
            ConsoleSessionStore.cookie("__Host-" + Self.loginCookie, in: cookies)
            ?? ConsoleSessionStore.cookie(Self.loginCookie, in: cookies) ?? ""
        guard let check = form["login_check"], !expected.isEmpty,
            constantTimeEqual(Array(check.utf8), Array(expected.utf8))
        else {
            return loginPage(
                request,
                context: context,
                error: "The sign-in form expired or came from another page. Try again.",
                status: .forbidden
            )
        }
        let presented = (form["key"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        if let wait = throttle.admit(
            key: APIKey(presented: presented)?.prefix,
            address: clientAddress(request, context: context)
        ) {
            context.logger.notice("console sign-in refused: too many attempts", metadata: ["retry_after_s": "\(wait)"])
            var response = loginPage(
                request,
                context: context,
                error: "Too many sign-in attempts from here or with this key. Try again in \(wait) seconds.",
                status: .tooManyRequests
            )
            response.headers[.retryAfter] = "\(wait)"
            return response
        }
        guard let key = APIKey(presented: presented), let record = try await keys.verify(key) else {
            context.logger.notice("console sign-in refused: unknown or revoked API key")
            return loginPage(request, context: context, error: "Unknown or revoked API key.", status: .unauthorized)
        }
        let (token, _) = try await sessions.open(key: record)
        context.logger.notice(
            "console sign-in",
            metadata: ["push.key": "\(record.prefix)", "push.app": "\(record.appID ?? "(admin)")"]
        )
        var response = Self.redirect("/console")
        let lifetime = Int(settings.sessionLifetime.components.seconds)
        response.headers.append(
            HTTPField(
                name: .setCookie,
                value: cookie(
                    ConsoleSessionStore.cookieName,
                    token,
                    request: request,
                    context: context,
                    maxAge: lifetime
                )
            )
        )
        response.headers.append(
            HTTPField(
                name: .setCookie,
                value: cookie(Self.loginCookie, "", request: request, context: context, maxAge: 0)
            )
        )
        return response
    }

    @Sendable func logout(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context, form: true) { visit in
            try await self.sessions.close(token: visit.token)
            var response = Self.redirect("/console/login")
            response.headers.append(
                HTTPField(
                    name: .setCookie,
                    value: self.cookie(
                        ConsoleSessionStore.cookieName,
                        "",
                        request: request,
                        context: context,
                        maxAge: 0
                    )
                )
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
        return
            "\(secure ? "__Host-" : "")\(name)=\(value); Path=/; HttpOnly; SameSite=Strict; Max-Age=\(maxAge)\(secure ? "; Secure" : "")"
    }

    static let forwardedProto = HTTPField.Name("X-Forwarded-Proto")!
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!

    /// The client's address, for the sign-in throttle: the peer's, or behind one of
    /// `http.trusted_proxies`, the last address of its `X-Forwarded-For` (the one it added).
    func clientAddress(_ request: Request, context: AppRequestContext) -> String {
        let peer = context.channel.remoteAddress
        if trustedProxies.contains(peer),
            let last = request.headers[values: Self.forwardedFor].last?.split(separator: ",").last
        {
            let forwarded = last.trimmingSpacesAndTabs()
            if !forwarded.isEmpty { return String(forwarded) }
        }
        return peer?.ipAddress ?? "unknown"
    }

    /// Whether the visitor's request came over TLS, as ``ConsoleSettings/secureCookies`` decides:
    /// its own scheme, or `X-Forwarded-Proto: https` on a connection from one of
    /// `http.trusted_proxies` (anyone else can send that header).
    func isSecure(_ request: Request, context: AppRequestContext) -> Bool {
        switch settings.secureCookies {
        case "always": return true
        case "never": return false
        default:
            if request.head.scheme?.lowercased() == "https" { return true }
            guard let forwarded = request.headers[Self.forwardedProto],
                trustedProxies.contains(context.channel.remoteAddress)
            else { return false }
            // A proxy chain may append: the last value is the one the trusted proxy set.
            let last = forwarded.split(separator: ",").last.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            return last == "https"
        }
    }

    // MARK: Pages

    typealias Operator = OperatorController<AppRequestContext>

    @Sendable func overview(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context) { visit in
            let ready = try await visit.api(.get, "/ready")
            let readiness = ready.value(HealthController<AppRequestContext>.Readiness.self)
            var page = visit.page(
                title: "Overview",
                page: "overview",
                view: ConsoleView.OverviewView(
                    readyText: ready.ok ? "ready" : "not ready: \(ready.errorMessage)",
                    readyClass: ready.ok ? "ok" : "bad",
                    schemaVersion: readiness.map { String($0.schemaVersion) } ?? "unknown"
                )
            )
            let answer = try await visit.api(.get, "/v1/overview")
            if let overview = answer.value(Operator.Overview.self) {
                page.view.generatedAt = ConsoleView.time(overview.generatedAt)
                page.view.apps = overview.apps.map(ConsoleView.AppOverviewView.init)
            } else {
                page.error = answer.errorMessage
            }
            return self.pages.html(template: "overview", page: page)
        }
    }

    @Sendable func find(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context) { visit in
            let apps = try await visit.appIDs()
            let params = request.uri.queryParameters
            let app = params["app"].map(String.init) ?? apps.first ?? ""
            let by = params["by"].map(String.init) ?? "notification"
            let query = (params["q"].map(String.init) ?? "").trimmingCharacters(in: .whitespaces)
            var page = visit.page(
                title: "Find",
                page: "find",
                view: ConsoleView.FindView(
                    appOptions: apps.map { ConsoleView.AppOption(id: $0, selected: $0 == app) },
                    byOptions: ConsoleView.Choice.list(
                        [("notification", "Notification id"), ("ticket", "Ticket id"), ("device", "Device token")],
                        selected: by
                    ),
                    q: query
                )
            )
            guard !query.isEmpty, !app.isEmpty else { return self.pages.html(template: "find", page: page) }
            let base = "/v1/apps/\(ConsoleView.segment(app))"
            let cursor = params["cursor"].map { "&cursor=\(ConsoleView.segment(String($0)))" } ?? ""
            let nextPage = { (next: String?) in
                next.map {
                    "/console/find?app=\(ConsoleView.segment(app))&by=\(by)&q=\(ConsoleView.segment(query))&cursor=\($0)"
                }
            }
            switch by {
            case "ticket":
                let answer = try await visit.api(
                    .get,
                    "\(base)/tickets/\(ConsoleView.segment(query))/notifications?limit=20\(cursor)"
                )
                guard let list = answer.value(ConsoleAPIList<NotificationStatusRecord>.self) else {
                    page.error = answer.errorMessage
                    break
                }
                let notifications = list.items.map { ConsoleView.NotificationView($0, app: app) }
                page.view.ticket = ConsoleView.TicketView(
                    ticketID: query,
                    notifications: notifications,
                    empty: notifications.isEmpty
                )
                page.view.nextPage = nextPage(list.next)
            case "device":
                let answer = try await visit.api(
                    .get,
                    "\(base)/devices/\(ConsoleView.segment(query))/deliveries?limit=50\(cursor)"
                )
                guard let list = answer.value(ConsoleAPIList<DeliveryStatusRecord>.self) else {
                    page.error = answer.errorMessage
                    break
                }
                page.view.device = ConsoleView.DeviceHistoryView(
                    deliveries: list.items.map(ConsoleView.DeliveryView.init),
                    empty: list.items.isEmpty
                )
                page.view.nextPage = nextPage(list.next)
            default:
                let answer = try await visit.api(.get, "\(base)/notifications/\(ConsoleView.segment(query))")
                guard let notification = answer.value(NotificationStatusRecord.self) else {
                    page.error = answer.errorMessage
                    break
                }
                page.view.notification = ConsoleView.NotificationView(notification, app: app)
            }
            return self.pages.html(template: "find", page: page)
        }
    }

    @Sendable func devices(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context) { visit in
            let apps = try await visit.appIDs()
            let params = request.uri.queryParameters
            let app = params["app"].map(String.init) ?? apps.first ?? ""
            let by = params["by"].map(String.init) ?? "token"
            let query = (params["q"].map(String.init) ?? "").trimmingCharacters(in: .whitespaces)
            var page = visit.page(
                title: "Devices",
                page: "devices",
                view: ConsoleView.DevicesView(
                    appOptions: apps.map { ConsoleView.AppOption(id: $0, selected: $0 == app) },
                    byOptions: ConsoleView.Choice.list([("token", "Device token"), ("user", "User id")], selected: by),
                    q: query
                )
            )
            if params["done"] == "unregistered" {
                page.flash = ConsoleView.Flash(kind: "ok", text: "The device was unregistered.")
            }
            guard !query.isEmpty, !app.isEmpty else { return self.pages.html(template: "devices", page: page) }
            let base = "/v1/apps/\(ConsoleView.segment(app))"
            var found: [Device] = []
            var owner: String?
            if by == "user" {
                let answer = try await visit.api(.get, "\(base)/users/\(ConsoleView.segment(query))/devices")
                if let list = answer.value(ConsoleAPIList<Device>.self) {
                    found = list.items
                } else {
                    page.error = answer.errorMessage
                }
                owner = query
            } else {
                let answer = try await visit.api(.get, "\(base)/devices/\(ConsoleView.segment(query))")
                if let device = answer.value(Device.self) {
                    found = [device]
                    owner = device.userID ?? device.token
                } else if answer.status == .notFound {
                    page.view.notFound = true
                } else {
                    page.error = answer.errorMessage
                }
            }
            page.view.devices = found.map { ConsoleView.DeviceRow($0, app: app) }
            page.view.searched = true
            if let owner, !found.isEmpty || by == "user" {
                let answer = try await visit.api(.get, "\(base)/users/\(ConsoleView.segment(owner))/unread")
                if let unread = answer.value(UnreadSummary.self) {
                    let shown = owner.utf8.count >= 32 ? Redaction.token(owner) : owner
                    page.view.unread = ConsoleView.UnreadView(
                        owner: shown,
                        total: unread.total,
                        tickets: unread.tickets
                    )
                } else {
                    page.view.unreadError = answer.errorMessage
                }
            }
            return self.pages.html(template: "devices", page: page)
        }
    }

    @Sendable func confirmUnregister(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context) { visit in
            let app = request.uri.queryParameters["app"].map(String.init) ?? ""
            let token = request.uri.queryParameters["token"].map(String.init) ?? ""
            let page = visit.page(
                title: "Unregister a device",
                page: "devices",
                view: ConsoleView.UnregisterView(app: app, token: token)
            )
            return self.pages.html(template: "unregister", page: page)
        }
    }

    @Sendable func unregister(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context, form: true) { visit in
            let app = visit.form["app"] ?? ""
            let token = visit.form["token"] ?? ""
            let answer = try await visit.api(
                .delete,
                "/v1/apps/\(ConsoleView.segment(app))/devices/\(ConsoleView.segment(token))"
            )
            guard answer.ok else {
                var page = visit.page(
                    title: "Unregister a device",
                    page: "devices",
                    view: ConsoleView.UnregisterView(app: app, token: token)
                )
                page.error = answer.errorMessage
                return self.pages.html(template: "unregister", page: page, status: answer.status)
            }
            return Self.redirect(
                "/console/devices?app=\(ConsoleView.segment(app))&by=token&q=\(ConsoleView.segment(token))&done=unregistered"
            )
        }
    }

    @Sendable func jobs(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context) { visit in
            var page = visit.page(
                title: "Jobs",
                page: "jobs",
                view: ConsoleView.JobsView(appOptions: try await visit.appIDs().map { ConsoleView.AppOption(id: $0) })
            )
            let answer = try await visit.api(.get, "/v1/admin/jobs?limit=20")
            if let list = answer.value(ConsoleAPIList<Job>.self) {
                page.view.jobs = list.items.map(ConsoleView.JobRow.init)
                page.view.admin = true
            } else {
                page.error = answer.errorMessage
            }
            if request.uri.queryParameters["done"] == "cancelled" {
                page.flash = ConsoleView.Flash(kind: "ok", text: "The job was cancelled.")
            }
            return self.pages.html(template: "jobs", page: page)
        }
    }

    @Sendable func cancelJob(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context, form: true) { visit in
            let id = try context.parameters.require("id")
            let answer = try await visit.api(.post, "/v1/admin/jobs/\(ConsoleView.segment(id))/cancel")
            guard answer.ok else {
                return self.pages.message(
                    visit,
                    title: "Jobs",
                    page: "jobs",
                    text: answer.errorMessage,
                    status: answer.status
                )
            }
            return Self.redirect("/console/jobs?done=cancelled")
        }
    }

    @Sendable func appsPage(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context) { visit in
            var page = try await self.appsPageContent(visit)
            switch request.uri.queryParameters["done"] {
            case "saved": page.flash = ConsoleView.Flash(kind: "ok", text: "The managed app was saved.")
            case "deleted": page.flash = ConsoleView.Flash(kind: "ok", text: "The managed app was deleted.")
            default: break
            }
            return self.pages.html(template: "apps", page: page)
        }
    }

    /// The Apps page: `GET /v1/apps`, and for an admin `GET /v1/admin/apps` (sources, managed apps).
    private func appsPageContent(_ visit: ConsoleVisit) async throws -> ConsoleView.ConsolePage<ConsoleView.AppsView> {
        var page = visit.page(title: "Apps", page: "apps", view: ConsoleView.AppsView())
        let answer = try await visit.api(.get, "/v1/apps")
        if let list = answer.value(ConsoleAPIList<Operator.AppView>.self) {
            page.view.apps = list.items.map(ConsoleView.AppRow.init)
        } else {
            page.error = answer.errorMessage
        }
        if case .admin = visit.session.principal {
            page.view.admin = true
            let all = try await visit.api(.get, "/v1/admin/apps")
            if let list = all.value(AppAdminController<AppRequestContext>.AppList.self) {
                page.view.all = list.apps.map(ConsoleView.AdminAppRow.init)
                page.view.managedEnabled = list.managedAppsEnabled
                if !list.managedAppsEnabled { page.view.managedMessage = ManagedAppStoreError.disabled.message }
            } else {
                page.view.managedMessage = all.errorMessage
            }
        }
        return page
    }

    /// The add-or-replace form: `PUT /v1/admin/apps/{app}` with the form's JSON as the body.
    @Sendable func saveManagedApp(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context, form: true) { visit in
            let app = (visit.form["app"] ?? "").trimmingCharacters(in: .whitespaces)
            let configuration = visit.form["configuration"] ?? ""
            let answer = try await visit.api(
                .put,
                "/v1/admin/apps/\(ConsoleView.segment(app))",
                body: ByteBuffer(string: configuration)
            )
            guard answer.ok else {
                var page = try await self.appsPageContent(visit)
                page.error = answer.errorMessage
                page.view.draftID = app
                page.view.draft = configuration
                return self.pages.html(template: "apps", page: page, status: answer.status)
            }
            return Self.redirect("/console/apps?done=saved")
        }
    }

    /// `DELETE /v1/admin/apps/{app}`.
    @Sendable func deleteManagedApp(_ request: Request, context: AppRequestContext) async throws -> Response {
        try await withSession(request, context: context, form: true) { visit in
            let app = visit.form["app"] ?? ""
            let answer = try await visit.api(.delete, "/v1/admin/apps/\(ConsoleView.segment(app))")
            guard answer.ok else {
                return self.pages.message(
                    visit,
                    title: "Apps",
                    page: "apps",
                    text: answer.errorMessage,
                    status: answer.status
                )
            }
            return Self.redirect("/console/apps?done=deleted")
        }
    }

    // MARK: Sessions

    /// Runs `page` for a signed-in visitor; without a live session, sends them to sign in. A form
    /// (`form: true`) must carry the session's CSRF token as `csrf_token`, or gets 403.
    private func withSession(
        _ request: Request,
        context: AppRequestContext,
        form: Bool = false,
        _ page: (ConsoleVisit) async throws -> Response
    ) async throws -> Response {
        guard let token = Authenticator.sessionCookie(request), let session = try await sessions.session(token: token)
        else {
            return Self.redirect(
                Authenticator.sessionCookie(request) == nil ? "/console/login" : "/console/login?ended=1"
            )
        }
        guard let responder = responder.withLock({ $0 }) else {
            throw APIError(.serviceUnavailable, code: "starting", message: "the console is starting")
        }
        var fields: [String: String] = [:]
        if form {
            fields = try await ConsoleVisit.form(request)
            let presented = fields["csrf_token"] ?? ""
            guard constantTimeEqual(Array(presented.utf8), Array(session.csrfToken.utf8)) else {
                context.logger.notice("console form refused: missing or wrong CSRF token")
                let visit = ConsoleVisit(
                    token: token,
                    session: session,
                    form: [:],
                    responder: responder,
                    context: context
                )
                return pages.message(
                    visit,
                    title: "Refused",
                    page: "",
                    text: "This form is missing its CSRF token or carries a wrong one; reload the page and try again.",
                    status: .forbidden
                )
            }
        }
        return try await page(
            ConsoleVisit(token: token, session: session, form: fields, responder: responder, context: context)
        )
    }

    // MARK: Helpers

    static func redirect(_ location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
    }
}
