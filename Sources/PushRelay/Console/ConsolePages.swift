import HTTPTypes
import Hummingbird
import Mustache
import NIOCore

/// The console's templates (Mustache, compiled once at start-up) and how a page is answered.
///
/// The templates are in the binary, so the console needs no files beside it, no build step and no
/// network: no CDN, no web fonts. Every value is HTML-escaped by Mustache (`{{…}}`).
struct ConsolePages: Sendable {
    let library: MustacheLibrary

    init() throws {
        var library = MustacheLibrary()
        for (name, text) in ConsoleTemplates.all {
            try library.register(text, named: name)
        }
        self.library = library
    }

    /// Headers of every console page: no caching, no framing, scripts and styles from the relay only.
    static let securityHeaders: HTTPFields = [
        .contentType: "text/html; charset=utf-8",
        .cacheControl: "no-store",
        .contentSecurityPolicy: "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        HTTPField.Name("X-Frame-Options")!: "DENY",
        HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        HTTPField.Name("Referrer-Policy")!: "no-referrer",
    ]

    func html(template: String, view: [String: Any], status: HTTPResponse.Status = .ok) -> Response {
        let text = library.render(view, withTemplate: template) ?? "template \(template) is missing"
        return Response(status: status, headers: Self.securityHeaders, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    /// A page with one message (a refused form, an API error after an action).
    func message(_ visit: ConsoleController.Visit, title: String, page: String, text: String, status: HTTPResponse.Status) -> Response {
        var view = visit.view(title: title, page: page)
        view["message"] = text
        return html(template: "message", view: view, status: status)
    }

    static func asset(_ text: String, type: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: type, .cacheControl: "no-cache", HTTPField.Name("X-Content-Type-Options")!: "nosniff"],
            body: .init(byteBuffer: ByteBuffer(string: text))
        )
    }
}

/// The console's Mustache templates. `layout` is the page frame; each page fills its `content`.
enum ConsoleTemplates {
    static let all: [(String, String)] = [
        ("layout", layout), ("login", login), ("overview", overview), ("find", find), ("notification", notification),
        ("delivery", delivery), ("devices", devices), ("unregister", unregister), ("jobs", jobs), ("apps", apps), ("message", message),
    ]

    static let layout = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        {{#csrf}}<meta name="csrf-token" content="{{csrf}}">{{/csrf}}
        <title>{{title}} · PushRelay console</title>
        <link rel="stylesheet" href="/console/static/console.css">
        <script src="/console/static/console.js" defer></script>
        </head>
        <body data-page="{{page}}">
        <header class="top">
        <a class="brand" href="/console">PushRelay</a>
        {{#signedIn}}
        <nav>{{#nav}}<a href="{{href}}"{{#current}} aria-current="page"{{/current}}>{{label}}</a>{{/nav}}</nav>
        <div class="who"><span id="who">{{who}}</span>
        <form method="post" action="/console/logout" class="inline"><input type="hidden" name="csrf_token" value="{{csrf}}"><button type="submit" class="link">Sign out</button></form>
        </div>
        {{/signedIn}}
        </header>
        <main>
        {{#flash}}<p class="flash {{kind}}" role="status">{{text}}</p>{{/flash}}
        {{#error}}<p class="flash bad" role="alert" id="error">{{error}}</p>{{/error}}
        {{$content}}{{/content}}
        </main>
        </body>
        </html>
        """

    static let login = """
        {{<layout}}{{$content}}
        <section class="card narrow">
        <h1>Sign in</h1>
        <p>Use an admin API key, or an app key to see that app only. The key is exchanged for a session; it is not stored in the browser.</p>
        <form method="post" action="/console/login" id="login-form">
        <input type="hidden" name="login_check" value="{{loginCheck}}">
        <label>API key <input type="password" name="key" id="key" autocomplete="off" required placeholder="prk_…"></label>
        <button type="submit">Sign in</button>
        </form>
        </section>
        {{/content}}{{/layout}}
        """

    static let overview = """
        {{<layout}}{{$content}}
        <h1>Overview</h1>
        <p class="health">Database <span class="badge {{readyClass}}" id="ready">{{readyText}}</span>
        · schema version <span id="schema-version">{{schemaVersion}}</span>
        · updated <span id="generated-at">{{generatedAt}}</span></p>
        {{#apps}}
        <section class="card app" data-app="{{app}}">
        <h2>{{app}}</h2>
        <div class="rates"><span><b data-field="rate.webhooks">{{webhookRate}}</b> webhooks/s</span> <span><b data-field="rate.pushes">{{pushRate}}</b> pushes/s</span> <small>(last full minute)</small></div>
        <canvas class="chart" data-app="{{app}}" height="120" role="img" aria-label="Webhooks and pushes per second over the last hour"></canvas>
        <p class="legend"><span class="key webhooks"></span> webhooks/s <span class="key pushes"></span> pushes/s, per minute, last hour</p>
        <div class="grid">
        <div><h3>Outcomes, last hour</h3><dl>
        <dt>Webhooks</dt><dd data-field="last_hour.webhooks">{{lastHour.webhooks}}</dd>
        <dt>Delivered</dt><dd data-field="last_hour.delivered">{{lastHour.delivered}}</dd>
        <dt>Failed</dt><dd data-field="last_hour.failed">{{lastHour.failed}}</dd>
        <dt>Expired</dt><dd data-field="last_hour.expired">{{lastHour.expired}}</dd>
        <dt>Dead tokens</dt><dd data-field="last_hour.dead_token">{{lastHour.dead_token}}</dd>
        <dt>Skipped</dt><dd data-field="last_hour.skipped">{{lastHour.skipped}}</dd>
        </dl></div>
        <div><h3>Queue</h3><dl>
        <dt>Pending</dt><dd data-field="queue.pending">{{queue.pending}}</dd>
        <dt>Sending</dt><dd data-field="queue.sending">{{queue.sending}}</dd>
        <dt>Retrying</dt><dd data-field="queue.retrying">{{queue.retrying}}</dd>
        </dl></div>
        <div><h3>Backlogs</h3><dl>
        <dt>Zendesk unregister</dt><dd data-field="zendesk_backlog">{{zendeskBacklog}}</dd>
        <dt>Feedback events</dt><dd data-field="events_backlog">{{eventsBacklog}}</dd>
        </dl></div>
        </div>
        </section>
        {{/apps}}
        {{^apps}}<p>No apps to show.</p>{{/apps}}
        {{/content}}{{/layout}}
        """

    static let find = """
        {{<layout}}{{$content}}
        <h1>Find a push</h1>
        <form method="get" action="/console/find" class="search">
        <label>App <select name="app">{{#appOptions}}<option value="{{id}}"{{#selected}} selected{{/selected}}>{{id}}</option>{{/appOptions}}</select></label>
        <label>By <select name="by">{{#byOptions}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/byOptions}}</select></label>
        <label class="grow">Value <input name="q" id="q" value="{{q}}" autocomplete="off" required></label>
        <button type="submit">Find</button>
        </form>
        {{#notification}}{{>notification}}{{/notification}}
        {{#ticket}}
        <h2>Ticket {{ticketID}}</h2>
        {{#empty}}<p>No notifications for this ticket.</p>{{/empty}}
        {{#notifications}}{{>notification}}{{/notifications}}
        {{/ticket}}
        {{#device}}
        <h2>Deliveries to this device</h2>
        {{#empty}}<p>No deliveries to this device.</p>{{/empty}}
        {{#deliveries}}{{>delivery}}{{/deliveries}}
        {{/device}}
        {{#nextPage}}<p><a href="{{nextPage}}">Older…</a></p>{{/nextPage}}
        {{/content}}{{/layout}}
        """

    static let notification = """
        <article class="card notification" data-notification="{{id}}">
        <h2><a href="{{link}}">Notification {{id}}</a> · ticket <a href="{{ticketLink}}">{{ticketID}}</a></h2>
        <p class="meta">{{title}} · created {{createdAt}}</p>
        <p class="counts">{{#counts}}<span class="status {{status}}">{{status}}: {{count}}</span> {{/counts}}</p>
        {{#deliveries}}{{>delivery}}{{/deliveries}}
        </article>
        """

    static let delivery = """
        <div class="delivery" data-delivery="{{id}}" data-status="{{status}}">
        <h3><span class="status {{status}}">{{status}}</span> {{platform}} <code>{{token}}</code> <small>{{kind}}{{#notificationID}} · notification {{notificationID}}{{/notificationID}}</small></h3>
        <ol class="timeline">
        <li><span class="when">{{createdAt}}</span> queued</li>
        {{#attempts}}<li><span class="when"></span>{{attempts}}{{#reason}}; last reason <code>{{reason}}</code>{{/reason}}</li>{{/attempts}}
        {{#final}}<li><span class="when">{{updatedAt}}</span> {{status}}{{#providerID}} · provider id <code class="provider-id">{{providerID}}</code>{{/providerID}}</li>{{/final}}
        {{^final}}<li><span class="when">{{updatedAt}}</span> waiting ({{status}})</li>{{/final}}
        </ol>
        </div>
        """

    static let devices = """
        {{<layout}}{{$content}}
        <h1>Devices</h1>
        <form method="get" action="/console/devices" class="search">
        <label>App <select name="app">{{#appOptions}}<option value="{{id}}"{{#selected}} selected{{/selected}}>{{id}}</option>{{/appOptions}}</select></label>
        <label>By <select name="by">{{#byOptions}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/byOptions}}</select></label>
        <label class="grow">Value <input name="q" id="q" value="{{q}}" autocomplete="off" required></label>
        <button type="submit">Look up</button>
        </form>
        {{#notFound}}<p>No such device in this app.</p>{{/notFound}}
        {{#searched}}
        <div class="table-wrap"><table class="devices">
        <thead><tr><th>Device</th><th>Platform</th><th>User</th><th>State</th><th>Updated</th><th></th></tr></thead>
        <tbody>
        {{#devices}}<tr data-status="{{status}}"><td><code title="{{token}}">{{tokenShort}}</code></td><td>{{platform}}</td><td>{{user}}</td>
        <td>{{#active}}<span class="status delivered">active</span>{{/active}}{{^active}}<span class="status failed">{{status}}</span>{{#reason}} ({{reason}}){{/reason}}{{/active}}</td>
        <td>{{updatedAt}}</td><td><a class="button danger" href="{{unregisterLink}}">Unregister…</a></td></tr>{{/devices}}
        {{^devices}}<tr><td colspan="6">No devices.</td></tr>{{/devices}}
        </tbody></table></div>
        {{/searched}}
        {{#unread}}
        <h2>Unread replies of {{owner}}: <span id="unread-total">{{total}}</span></h2>
        <table class="unread"><thead><tr><th>Ticket</th><th>Unread</th></tr></thead><tbody>
        {{#tickets}}<tr><td>{{ticket}}</td><td>{{unread}}</td></tr>{{/tickets}}
        {{^tickets}}<tr><td colspan="2">Nothing unread.</td></tr>{{/tickets}}
        </tbody></table>
        {{/unread}}
        {{#unreadError}}<p class="flash bad">Unread counts: {{unreadError}}</p>{{/unreadError}}
        {{/content}}{{/layout}}
        """

    static let unregister = """
        {{<layout}}{{$content}}
        <section class="card narrow">
        <h1>Unregister a device?</h1>
        <p>Device <code>{{tokenShort}}</code> of app <b>{{app}}</b> will get no more pushes until the app registers it again.</p>
        <form method="post" action="/console/devices/unregister" id="unregister-form">
        <input type="hidden" name="csrf_token" value="{{csrf}}">
        <input type="hidden" name="app" value="{{app}}">
        <input type="hidden" name="token" value="{{token}}">
        <button type="submit" class="danger">Unregister</button> <a href="{{back}}">Cancel</a>
        </form>
        </section>
        {{/content}}{{/layout}}
        """

    static let jobs = """
        {{<layout}}{{$content}}
        <h1>Bulk-unregister jobs</h1>
        {{#admin}}
        <section class="card">
        <h2>Start a job</h2>
        <form id="job-form" class="search" data-csrf="{{csrf}}">
        <label>App <select name="app" id="job-app">{{#appOptions}}<option value="{{id}}">{{id}}</option>{{/appOptions}}</select></label>
        <label class="grow">Token file (one token per line, or CSV) <input type="file" name="file" id="job-file" accept=".txt,.csv,text/plain,text/csv" required></label>
        <label class="check"><input type="checkbox" name="propagate" id="job-propagate"> also unregister in Zendesk</label>
        <button type="submit">Start</button>
        </form>
        <p id="job-message" role="status"></p>
        </section>
        <div class="table-wrap"><table class="jobs" id="jobs">
        <thead><tr><th>Job</th><th>App</th><th>State</th><th>Progress</th><th>Counts</th><th>Rate</th><th></th></tr></thead>
        <tbody>
        {{#jobs}}<tr data-job="{{id}}" data-status="{{status}}">
        <td><code>{{id}}</code><br><small>{{createdAt}}</small></td><td>{{app}}</td><td class="state"><span class="status {{status}}">{{status}}</span>{{#error}} <small>{{error}}</small>{{/error}}</td>
        <td><progress max="{{total}}" value="{{processed}}">{{percent}} %</progress> <span class="progress-text">{{processed}} / {{total}}</span></td>
        <td class="counts">removed {{removed}} · not found {{notFound}} · failed {{failed}} · forwarded {{forwarded}}</td>
        <td class="rate">–</td>
        <td>{{#cancellable}}<form method="post" action="/console/jobs/{{id}}/cancel" class="inline"><input type="hidden" name="csrf_token" value="{{csrf}}"><button type="submit" class="danger">Cancel</button></form>{{/cancellable}}</td>
        </tr>{{/jobs}}
        {{^jobs}}<tr class="none"><td colspan="7">No jobs yet.</td></tr>{{/jobs}}
        </tbody></table></div>
        {{/admin}}
        {{/content}}{{/layout}}
        """

    static let apps = """
        {{<layout}}{{$content}}
        <h1>Apps</h1>
        <p>The configuration as this instance loaded it. Secrets show their first characters only.</p>
        {{#apps}}
        <section class="card" data-app="{{id}}">
        <h2>{{id}}</h2>
        <dl class="settings">{{#settings}}<dt>{{label}}</dt><dd>{{value}}</dd>{{/settings}}</dl>
        <h3>Credentials</h3>
        <div class="table-wrap"><table><thead><tr><th>Platform</th><th>Kind</th><th>Last provider-token refresh</th><th>Expires</th><th>Last rejection</th></tr></thead><tbody>
        {{#credentials}}<tr><td>{{platform}}</td><td>{{kind}}</td><td>{{lastRefresh}}</td><td>{{expiresAt}}</td>
        <td>{{#rejection}}<span class="status failed">{{at}}</span> {{reason}}{{/rejection}}{{^rejection}}none{{/rejection}}</td></tr>{{/credentials}}
        {{^credentials}}<tr><td colspan="5">No APNs or FCM section.</td></tr>{{/credentials}}
        </tbody></table></div>
        </section>
        {{/apps}}
        {{/content}}{{/layout}}
        """

    static let message = """
        {{<layout}}{{$content}}
        <section class="card narrow"><h1>{{title}}</h1><p id="message">{{message}}</p><p><a href="/console">Back to the overview</a></p></section>
        {{/content}}{{/layout}}
        """
}
