import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Postgres
import Synchronization
import TestSupport
import Testing

@testable import PushRelay

/// The operator console's sessions and checks, over HTTP against a real database. The pages as a
/// person sees them are tested in a real browser by scripts/test/console-test.sh.
@Suite("Console: sign-in, sessions, CSRF, what a key sees", .serialized)
struct ConsoleTests {
    static let form: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]

    /// A signed-in browser: its session cookie and the CSRF token its pages carry.
    struct Browser {
        var cookie: String
        var csrf: String
        var headers: HTTPFields { [.cookie: cookie] }
    }

    static func encoded(_ fields: [(String, String)]) -> ByteBuffer {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return ByteBuffer(string: fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed)!)" }.joined(separator: "&"))
    }

    static func cookieValue(_ name: String, in response: TestResponse) -> String? {
        for header in response.headers[values: .setCookie] where header.hasPrefix("\(name)=") {
            return String(header.dropFirst(name.count + 1).prefix { $0 != ";" })
        }
        return nil
    }

    static func setCookie(_ name: String, in response: TestResponse) -> String? {
        response.headers[values: .setCookie].first { $0.hasPrefix("\(name)=") }
    }

    static func html(_ response: TestResponse) -> String { String(buffer: response.body) }

    /// Signs in with `key` the way a browser does: fetch the form (and its check cookie), post it.
    static func signIn(_ client: some TestClientProtocol, key: String, extra: HTTPFields = [:]) async throws -> (TestResponse, Browser?) {
        let page = try await client.execute(uri: "/console/login", method: .get)
        let check = try #require(cookieValue("pushrelay_login", in: page))
        #expect(html(page).contains("value=\"\(check)\""))
        var headers = form
        headers[.cookie] = "pushrelay_login=\(check)"
        headers.append(contentsOf: extra)
        let response = try await client.execute(
            uri: "/console/login",
            method: .post,
            headers: headers,
            body: encoded([("login_check", check), ("key", key)])
        )
        guard let session = cookieValue("pushrelay_session", in: response), !session.isEmpty else { return (response, nil) }
        let overview = try await client.execute(uri: "/console", method: .get, headers: [.cookie: "pushrelay_session=\(session)"])
        let text = html(overview)
        let csrf = try #require(text.firstRange(of: "name=\"csrf-token\" content=\"").map { text[$0.upperBound...].prefix { $0 != "\"" } })
        return (response, Browser(cookie: "pushrelay_session=\(session)", csrf: String(csrf)))
    }

    @Test("sign-in: a wrong key or a form without its check is refused; the session cookie is HttpOnly, SameSite=Strict, Secure over TLS")
    func signIn() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let admin = try await test.key(app: nil)
            // Not signed in: every page sends you to the form.
            let anonymous = try await client.execute(uri: "/console/find", method: .get)
            #expect(anonymous.status == .seeOther)
            #expect(anonymous.headers[.location] == "/console/login")

            let (wrong, noSession) = try await Self.signIn(client, key: "prk_000000000000_notarealkeynotarealkeynotarealkey0000000")
            #expect(wrong.status == .unauthorized)
            #expect(noSession == nil)
            #expect(Self.html(wrong).contains("Unknown or revoked API key"))
            #expect(!Self.html(wrong).contains("notarealkey"), "the page does not echo the key")

            // The check value must match the cookie set with the form.
            let forged = try await client.execute(
                uri: "/console/login",
                method: .post,
                headers: Self.form,
                body: Self.encoded([("login_check", "x"), ("key", admin)])
            )
            #expect(forged.status == .forbidden)
            #expect(Self.cookieValue("pushrelay_session", in: forged) == nil)

            let (ok, browser) = try await Self.signIn(client, key: admin)
            #expect(ok.status == .seeOther)
            #expect(ok.headers[.location] == "/console")
            let cookie = try #require(Self.setCookie("pushrelay_session", in: ok))
            #expect(cookie.contains("HttpOnly"))
            #expect(cookie.contains("SameSite=Strict"))
            #expect(!cookie.contains("Secure"), "plain HTTP: a Secure cookie would never be sent back")
            #expect(try await test.count("SELECT count(*) FROM console_sessions") == 1)
            // The table keeps a hash of the token, not the token.
            let session = try #require(browser).cookie.dropFirst("pushrelay_session=".count)
            #expect(try await test.count("SELECT count(*) FROM console_sessions WHERE token_hash = convert_to($1, 'UTF8')", [String(session)]) == 0)

            let page = try await client.execute(uri: "/console", method: .get, headers: try #require(browser).headers)
            #expect(page.status == .ok)
            #expect(Self.html(page).contains("<h1>Overview</h1>"))
            #expect(page.headers[.contentSecurityPolicy]?.contains("script-src 'self'") == true)

            // X-Forwarded-Proto from a peer that is not in http.trusted_proxies (none by default) is ignored.
            let (spoofed, _) = try await Self.signIn(client, key: admin, extra: [HTTPField.Name("X-Forwarded-Proto")!: "https"])
            #expect(Self.setCookie("pushrelay_session", in: spoofed)?.contains("Secure") == false)
        }
    }

    @Test(
        "X-Forwarded-Proto counts from http.trusted_proxies only; then the cookies are __Host- prefixed, Secure, Path=/, no Domain",
        arguments: [(["127.0.0.1"], true), (["10.0.0.0/8", "::1"], false), (["127.0.0.0/8"], true), ([], false)]
    )
    func trustedProxies(proxies: [String], trusted: Bool) async throws {
        let test = try await TestApp.make()
        let extra: [AbsoluteConfigKey: ConfigValue] = ["http.trusted_proxies": .init(.stringArray(proxies), isSecret: false)]
        try await test.application(extra: extra).testLive { client in
            let admin = try await test.key(app: nil)
            let https: HTTPFields = [HTTPField.Name("X-Forwarded-Proto")!: "https"]
            let page = try await client.execute(uri: "/console/login", method: .get, headers: https)
            let loginName = trusted ? "__Host-pushrelay_login" : "pushrelay_login"
            let check = try #require(Self.cookieValue(loginName, in: page), "\(page.headers[values: .setCookie])")
            var headers = Self.form
            headers[.cookie] = "\(loginName)=\(check)"
            headers.append(contentsOf: https)
            let response = try await client.execute(
                uri: "/console/login",
                method: .post,
                headers: headers,
                body: Self.encoded([("login_check", check), ("key", admin)])
            )
            #expect(response.status == .seeOther)
            let sessionName = trusted ? "__Host-pushrelay_session" : "pushrelay_session"
            let cookie = try #require(Self.setCookie(sessionName, in: response), "\(response.headers[values: .setCookie])")
            let attributes = cookie.split(separator: ";").dropFirst().map { $0.trimmingCharacters(in: .whitespaces) }
            #expect(attributes.contains("Secure") == trusted)
            #expect(attributes.contains("Path=/"))
            #expect(attributes.contains("HttpOnly"))
            #expect(attributes.contains("SameSite=Strict"))
            #expect(!attributes.contains { $0.lowercased().hasPrefix("domain") })
            if trusted { #expect(Self.setCookie("pushrelay_session", in: response) == nil, "only the prefixed cookie is set") }
            // The cookie, under the name it was set with, opens the console and the API.
            let session = try #require(Self.cookieValue(sessionName, in: response))
            let overview = try await client.execute(uri: "/console", method: .get, headers: [.cookie: "\(sessionName)=\(session)"])
            #expect(overview.status == .ok)
            let apps = try await client.execute(uri: "/v1/apps", method: .get, headers: [.cookie: "\(sessionName)=\(session)"])
            #expect(apps.status == .ok)
            guard trusted else { return }
            // Over TLS the plain names no longer count, even holding a live session: a sibling
            // subdomain can set those for this host (cookie tossing), never a __Host- one.
            let plain: HTTPFields = [.cookie: "pushrelay_session=\(session)", HTTPField.Name("X-Forwarded-Proto")!: "https"]
            let tossedPage = try await client.execute(uri: "/console", method: .get, headers: plain)
            #expect(tossedPage.status == .seeOther)
            #expect(tossedPage.headers[.location] == "/console/login")
            // A 401 closes its connection: on a connection of its own, not the test client's.
            let port = try #require(client.port)
            let refusedAPI = try await RawHTTP.send(
                port: port,
                RawHTTP.request("GET", "/v1/apps", headers: [("Cookie", "pushrelay_session=\(session)"), ("X-Forwarded-Proto", "https")])
            )
            #expect(refusedAPI?.status == 401)
            // The same over plain HTTP still reads the plain name.
            #expect(try await client.execute(uri: "/v1/apps", method: .get, headers: [.cookie: "pushrelay_session=\(session)"]).status == .ok)
            // A tossed login-check cookie does not sign in either.
            let form = try await client.execute(uri: "/console/login", method: .get, headers: https)
            let fresh = try #require(Self.cookieValue("__Host-pushrelay_login", in: form))
            var tossed = Self.form
            tossed[.cookie] = "pushrelay_login=\(fresh)"
            tossed.append(contentsOf: https)
            let refused = try await client.execute(
                uri: "/console/login",
                method: .post,
                headers: tossed,
                body: Self.encoded([("login_check", fresh), ("key", admin)])
            )
            #expect(refused.status == .forbidden)
        }
    }

    @Test("forms and unsafe API requests need the session's CSRF token; with it the console acts through the API")
    func csrf() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let admin = try await test.key(app: nil)
            let browser = try #require(try await Self.signIn(client, key: admin).1)
            for token in ["android-console-1", "android-console-2"] {
                let put = try await client.execute(
                    uri: "/v1/apps/support/devices/\(token)",
                    method: .put,
                    headers: bearer(admin),
                    body: ByteBuffer(string: #"{"platform":"android","user_id":"carol"}"#)
                )
                #expect(put.status == .created)
            }
            var headers = Self.form
            headers[.cookie] = browser.cookie
            // The console's form without its token, then with a wrong one: refused, nothing removed.
            for fields in [
                [("app", "support"), ("token", "android-console-1")], [("app", "support"), ("token", "android-console-1"), ("csrf_token", "wrong")],
            ] {
                let refused = try await client.execute(
                    uri: "/console/devices/unregister",
                    method: .post,
                    headers: headers,
                    body: Self.encoded(fields)
                )
                #expect(refused.status == .forbidden)
                #expect(Self.html(refused).contains("CSRF token"))
            }
            #expect(try await test.count("SELECT count(*) FROM devices WHERE token = 'android-console-1'") == 1)
            let done = try await client.execute(
                uri: "/console/devices/unregister",
                method: .post,
                headers: headers,
                body: Self.encoded([("app", "support"), ("token", "android-console-1"), ("csrf_token", browser.csrf)])
            )
            #expect(done.status == .seeOther)
            #expect(done.headers[.location]?.contains("done=unregistered") == true)
            #expect(try await test.count("SELECT count(*) FROM devices WHERE token = 'android-console-1'") == 0)

            // The API with the session cookie: reads need nothing more; writes need X-CSRF-Token.
            let read = try await client.execute(uri: "/v1/apps/support/users/carol/devices", method: .get, headers: browser.headers)
            #expect(read.status == .ok)
            #expect((read.json?["devices"] as? [Any])?.count == 1)
            let noToken = try await client.execute(uri: "/v1/apps/support/devices/android-console-2", method: .delete, headers: browser.headers)
            #expect(noToken.status == .forbidden)
            #expect((noToken.json?["error"] as? [String: Any])?["code"] as? String == "csrf_token_invalid")
            #expect(try await test.count("SELECT count(*) FROM devices WHERE token = 'android-console-2'") == 1)
            var withToken = browser.headers
            withToken[HTTPField.Name("X-CSRF-Token")!] = browser.csrf
            let deleted = try await client.execute(uri: "/v1/apps/support/devices/android-console-2", method: .delete, headers: withToken)
            #expect(deleted.status == .noContent)
            // A bearer credential is never mistaken for a session: a bad key is a 401 even with a cookie.
            var both = browser.headers
            both[.authorization] = "Bearer prk_000000000000_notarealkeynotarealkeynotarealkey0000000"
            #expect(try await client.execute(uri: "/v1/overview", method: .get, headers: both).status == .unauthorized)
        }
    }

    @Test("the Jobs page cancels a job through the API with its form's CSRF token, and not without it")
    func cancelJob() async throws {
        let test = try await TestApp.make()
        // 10,000 tokens two at a time: the job is still queued or running when the forms are posted.
        try await test.application(extra: [
            "jobs.batch_size": .init(.int(2), isSecret: false), "jobs.parallel_batches": .init(.int(1), isSecret: false),
        ])
        .test(.router) { client in
            try await AdminTests.register(test, count: 10_000)
            let admin = try await test.key(app: nil)
            let browser = try #require(try await Self.signIn(client, key: admin).1)
            let lines = (0..<10_000).map { "bulk-\($0)" }.joined(separator: "\n")
            let started = try await client.execute(
                uri: "/v1/admin/apps/support/devices/bulk-unregister",
                method: .post,
                headers: AdminTests.text(admin),
                body: ByteBuffer(string: lines)
            )
            let id = try #require(started.json?["job_id"] as? String)
            let page = Self.html(try await client.execute(uri: "/console/jobs", method: .get, headers: browser.headers))
            #expect(page.contains("action=\"/console/jobs/\(id)/cancel\""), "a queued or running job has its Cancel form")
            var headers = Self.form
            headers[.cookie] = browser.cookie
            let refused = try await client.execute(uri: "/console/jobs/\(id)/cancel", method: .post, headers: headers, body: Self.encoded([]))
            #expect(refused.status == .forbidden)
            let status = { try await client.execute(uri: "/v1/admin/jobs/\(id)", method: .get, headers: bearer(admin)).json?["status"] as? String }
            #expect(["queued", "running"].contains(try await status()), "the refused form changed nothing")
            let done = try await client.execute(
                uri: "/console/jobs/\(id)/cancel",
                method: .post,
                headers: headers,
                body: Self.encoded([("csrf_token", browser.csrf)])
            )
            #expect(done.status == .seeOther)
            #expect(done.headers[.location]?.contains("done=cancelled") == true)
            #expect(try await status() == "cancelled")
            let processed = try await client.execute(uri: "/v1/admin/jobs/\(id)", method: .get, headers: bearer(admin)).json?["processed"] as? Int
            #expect((processed ?? 0) < 10_000, "stopped before the end")
            let after = Self.html(try await client.execute(uri: "/console/jobs", method: .get, headers: browser.headers))
            #expect(!after.contains("action=\"/console/jobs/\(id)/cancel\""), "a cancelled job has no Cancel form")
        }
    }

    @Test("a key holds at most console.max_sessions_per_key sessions, the oldest closed; a sign-in moves the sessions' generation, not the keys'")
    func sessionsPerKey() async throws {
        let test = try await TestApp.make()
        let app = try await test.application(extra: ["console.max_sessions_per_key": .init(.int(2), isSecret: false)])
        try await app.test(.router) { client in
            let key = try await test.key(app: nil)
            let other = try #require(try await Self.signIn(client, key: try await test.key(app: nil)).1)
            func generation(_ table: String) async throws -> Int64 {
                try #require(try await test.client.query("SELECT generation FROM \(table)").first).decode(Int64.self, at: 0)
            }
            let (keysBefore, sessionsBefore) = (try await generation("api_key_generation"), try await generation("console_session_generation"))
            var browsers: [Browser] = []
            for _ in 0..<4 { browsers.append(try #require(try await Self.signIn(client, key: key).1)) }
            #expect(try await generation("api_key_generation") == keysBefore, "a sign-in made every instance read every key again")
            #expect(try await generation("console_session_generation") != sessionsBefore)
            #expect(try await test.count("SELECT count(*) FROM console_sessions") == 3, "two of the key's, one of the other key's")
            // The two oldest of the key's ended (within the copy's second); the newest two and the other key's act.
            for browser in browsers[..<2] {
                #expect(
                    try await eventually {
                        try await client.execute(uri: "/v1/overview", method: .get, headers: browser.headers).status == .unauthorized
                    }
                )
            }
            for browser in browsers[2...] + [other] {
                #expect(try await client.execute(uri: "/v1/overview", method: .get, headers: browser.headers).status == .ok)
            }
        }
    }

    @Test("sign-ins are paced per key and per client address: past either the form answers 429 with Retry-After and opens nothing")
    func signInThrottle() async throws {
        let test = try await TestApp.make()
        // One attempt a minute per key, two per address: the next one refills only after 30-60 s,
        // far longer than these requests take (the refill itself: SignInThrottleTests, on a test clock).
        let limits: [AbsoluteConfigKey: ConfigValue] = [
            "console.sign_ins_per_key_per_minute": .init(.int(1), isSecret: false),
            "console.sign_ins_per_address_per_minute": .init(.int(2), isSecret: false),
        ]
        try await test.application(extra: limits).test(.router) { client in
            let (key, other) = (try await test.key(app: nil), try await test.key(app: nil))
            #expect(try await Self.signIn(client, key: key).1 != nil)
            let refused = try await Self.signIn(client, key: key).0
            #expect(refused.status == .tooManyRequests)
            let wait = try #require(refused.headers[.retryAfter].flatMap { Int($0) })
            #expect((1...60).contains(wait))
            #expect(Self.html(refused).contains("Too many sign-in attempts"))
            #expect(Self.cookieValue("pushrelay_session", in: refused) == nil)
            // Another key from the same address: its first attempt is the address's second.
            #expect(try await Self.signIn(client, key: other).1 != nil)
            for attempt in [other, "prk_made_up_key_value"] {
                #expect(try await Self.signIn(client, key: attempt).0.status == .tooManyRequests)
            }
            #expect(try await test.count("SELECT count(*) FROM console_sessions") == 2)
        }
    }

    @Test("a session ends when its key is revoked, when idle, and at sign-out")
    func sessionEnds() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let store = APIKeyStore(client: test.client)
            let (record, key) = try await store.create(appID: nil, scopes: [], label: "console")
            let first = try #require(try await Self.signIn(client, key: key.plaintext).1)
            let second = try #require(try await Self.signIn(client, key: key.plaintext).1)
            let third = try #require(try await Self.signIn(client, key: try await test.key(app: nil)).1)
            #expect(try await client.execute(uri: "/v1/overview", method: .get, headers: first.headers).status == .ok)

            // Revoking the key (here from another store, as the CLI or another instance would)
            // ends both of its sessions within the key cache's second, for pages and the API.
            #expect(try await store.revoke(record.prefix))
            #expect(
                try await eventually {
                    try await client.execute(uri: "/v1/overview", method: .get, headers: first.headers).status == .unauthorized
                }
            )
            for browser in [first, second] {
                let page = try await client.execute(uri: "/console/jobs", method: .get, headers: browser.headers)
                #expect(page.status == .seeOther)
                #expect(page.headers[.location] == "/console/login?ended=1")
                #expect(try await client.execute(uri: "/v1/overview", method: .get, headers: browser.headers).status == .unauthorized)
            }
            #expect(try await client.execute(uri: "/v1/overview", method: .get, headers: third.headers).status == .ok)

            // Idle past the timeout (30 minutes by default). The session is read again once its
            // minute in memory is over or the key generation moves: move it, as that minute would.
            try await test.client.query("UPDATE console_sessions SET last_seen_at = now() - interval '31 minutes'")
            try await test.client.query("UPDATE api_key_generation SET generation = generation + 1")
            #expect(
                try await eventually {
                    try await client.execute(uri: "/v1/overview", method: .get, headers: third.headers).status == .unauthorized
                }
            )

            // Sign-out needs the CSRF token, clears the cookie and deletes the session.
            let fourth = try #require(try await Self.signIn(client, key: try await test.key(app: nil)).1)
            var headers = Self.form
            headers[.cookie] = fourth.cookie
            let refused = try await client.execute(uri: "/console/logout", method: .post, headers: headers, body: Self.encoded([]))
            #expect(refused.status == .forbidden)
            let out = try await client.execute(
                uri: "/console/logout",
                method: .post,
                headers: headers,
                body: Self.encoded([("csrf_token", fourth.csrf)])
            )
            #expect(out.status == .seeOther)
            #expect(Self.setCookie("pushrelay_session", in: out)?.contains("Max-Age=0") == true)
            #expect(try await client.execute(uri: "/v1/overview", method: .get, headers: fourth.headers).status == .unauthorized)
        }
    }

    @Test(
        "sessions are checked from memory: uses write last_seen_at at most once a minute, made-up cookies cost no query, a session ended anywhere ends here"
    )
    func sessionsFromMemory() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let admin = try await test.key(app: nil)
            let browser = try #require(try await Self.signIn(client, key: admin).1)
            let other = try #require(try await Self.signIn(client, key: admin).1)
            let madeUp: HTTPFields = [.cookie: "pushrelay_session=" + String(repeating: "A", count: 43)]
            #expect(try await client.execute(uri: "/v1/overview", method: .get, headers: browser.headers).status == .ok)
            #expect(try await client.execute(uri: "/v1/overview", method: .get, headers: madeUp).status == .unauthorized)
            let seen = { () async throws -> [String] in
                try await test.client.query("SELECT last_seen_at::text FROM console_sessions ORDER BY token_hash").rows.map {
                    try $0.decode(String.self, at: 0)
                }
            }
            let before = try await seen()

            // While console_sessions is locked, a request that read or wrote it would wait.
            let answers = Mutex<[HTTPResponse.Status]?>(nil)
            let requests = Task {
                var statuses: [HTTPResponse.Status] = []
                for index in 0..<20 {
                    statuses.append(try await client.execute(uri: "/v1/overview", method: .get, headers: browser.headers).status)
                    // The same made-up cookie, then a new one each time: neither costs a query.
                    let cookie = index % 2 == 0 ? madeUp : [.cookie: "pushrelay_session=" + String(format: "%043d", index)]
                    statuses.append(try await client.execute(uri: "/v1/overview", method: .get, headers: cookie).status)
                }
                answers.withLock { $0 = statuses }
            }
            let whileLocked = try await test.client.withTransaction { session in
                _ = try await session.query("LOCK TABLE console_sessions IN ACCESS EXCLUSIVE MODE")
                _ = await eventually { answers.withLock { $0 } != nil }
                return answers.withLock { $0 }
            }
            _ = await requests.result
            let statuses = try #require(whileLocked, "the requests waited for the lock: they queried console_sessions")
            #expect(statuses.enumerated().allSatisfy { $0.element == ($0.offset % 2 == 0 ? .ok : .unauthorized) }, "\(statuses)")
            #expect(try await seen() == before, "a use within the minute wrote last_seen_at")

            // A session ended on another instance (its row deleted there) ends here within the
            // key generation's second; the other session is untouched.
            let hash = try #require(browser.cookie.split(separator: "=", maxSplits: 1).last.map(String.init))
            try await test.client.query("DELETE FROM console_sessions WHERE token_hash = $1", [ConsoleSessionStore.hash(hash)])
            #expect(
                try await eventually {
                    try await client.execute(uri: "/v1/overview", method: .get, headers: browser.headers).status == .unauthorized
                }
            )
            #expect(try await client.execute(uri: "/v1/overview", method: .get, headers: other.headers).status == .ok)
        }
    }

    @Test("an app key's session sees its own app only; the Apps page and /v1/apps show no secret")
    func appKeyAndSecrets() async throws {
        let test = try await TestApp.make(signing: true)
        try await test.application().test(.router) { client in
            let appKey = try await test.key(app: "support")
            let browser = try #require(try await Self.signIn(client, key: appKey).1)
            let overview = try await client.execute(uri: "/v1/overview", method: .get, headers: browser.headers)
            #expect((overview.json?["apps"] as? [[String: Any]])?.map { $0["app"] as? String } == ["support"])
            let apps = try await client.execute(uri: "/v1/apps", method: .get, headers: browser.headers)
            #expect((apps.json?["apps"] as? [[String: Any]])?.map { $0["id"] as? String } == ["support"])
            // Jobs are an admin's: the page says so (the API's answer), and starting one is refused.
            let jobs = try await client.execute(uri: "/console/jobs", method: .get, headers: browser.headers)
            #expect(Self.html(jobs).contains("this operation needs an admin API key"))
            #expect(!Self.html(jobs).contains("id=\"job-form\""))
            var upload = browser.headers
            upload[HTTPField.Name("X-CSRF-Token")!] = browser.csrf
            upload[.contentType] = "text/plain"
            let start = try await client.execute(
                uri: "/v1/admin/apps/support/devices/bulk-unregister",
                method: .post,
                headers: upload,
                body: ByteBuffer(string: "a\nb\n")
            )
            #expect(start.status == .forbidden)
            // Another app's notification through Find: the API's 403, shown on the page.
            let find = try await client.execute(uri: "/console/find?app=other&by=notification&q=1", method: .get, headers: browser.headers)
            #expect(Self.html(find).contains("this API key belongs to another app"))

            let admin = try #require(try await Self.signIn(client, key: try await test.key(app: nil)).1)
            let page = Self.html(try await client.execute(uri: "/console/apps", method: .get, headers: admin.headers))
            let json = String(buffer: try await client.execute(uri: "/v1/apps", method: .get, headers: admin.headers).body)
            for secret in [TestApp.webhookSecret, TestApp.rotatedSecret, TestApp.otherSecret, TestApp.signingSecret, TestApp.userTokenKey] {
                #expect(!page.contains(secret))
                #expect(!json.contains(secret))
            }
            #expect(page.contains(SecretIdentifier.fingerprint(TestApp.webhookSecret)))
            #expect(!page.contains("supp…"))
            #expect(page.contains("data-app=\"other\""))
        }
    }

    @Test("the Overview counts webhooks per minute, summed in PostgreSQL")
    func overviewCounts() async throws {
        let test = try await TestApp.make()
        try await test.application().test(.router) { client in
            let admin = try await test.key(app: nil)
            for ticket in 1...3 {
                let response = try await client.execute(
                    uri: "/v1/webhooks/zendesk/support/\(TestApp.webhookSecret)",
                    method: .post,
                    headers: [.contentType: "application/json"],
                    body: ByteBuffer(
                        string:
                            #"{"devices":[{"identifier":"android-overview","type":"android"}],"notification":{"title":"t","body":"b","ticket_id":"\#(ticket)"}}"#
                    )
                )
                #expect(response.status == .accepted)
            }
            var support: [String: Any]?
            let counted = try await eventually {
                let overview = try await client.execute(uri: "/v1/overview", method: .get, headers: bearer(admin))
                support = (overview.json?["apps"] as? [[String: Any]])?.first { $0["app"] as? String == "support" }
                return (support?["last_hour"] as? [String: Any])?["webhooks"] as? Int == 3
            }
            #expect(counted)
            let minutes = try #require(support?["minutes"] as? [[String: Any]])
            #expect(minutes.count == 60)
            #expect(minutes.reduce(0) { $0 + ($1["webhooks"] as? Int ?? 0) } == 3)
            // Delivery is off in this app: the three pushes wait in the queue.
            #expect((support?["queue"] as? [String: Any])?["pending"] as? Int == 3)
            #expect(try await test.count("SELECT coalesce(sum(webhooks), 0)::int FROM activity_minutes WHERE app_id = 'support'") == 3)
        }
    }
}
