import Foundation

/// What the console's templates render: the layout's values (``ConsolePage``) around each page's own
/// (``ConsolePage/view``, which every page template opens as its `{{#view}}` section), built from the
/// API's own answer types. Mustache reads these by name, so a property is named as the template
/// refers to it; an absent optional lets a lookup fall through to the enclosing values, as a
/// missing key would. ``ConsoleController`` builds them from what its pages' API calls answer.
enum ConsoleView {
    /// A path segment or query value, percent-encoded (unreserved characters kept).
    static func segment(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics.intersection(
            CharacterSet(charactersIn: Unicode.Scalar(0)..<Unicode.Scalar(128))
        )
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    /// A time from the API as shown: `2026-11-24 11:30:05 UTC`.
    static func time(_ date: Date) -> String {
        date.formatted(.iso8601).replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: " UTC")
    }

    /// One page: the layout's values and the page's view.
    struct ConsolePage<View: Sendable>: Sendable {
        var title: String
        var page: String
        var signedIn = false
        var who = ""
        var csrf: String?
        var nav: [NavLink] = []
        var flash: Flash?
        var error: String?
        var view: View
    }

    struct NavLink: Sendable {
        var href: String
        var label: String
        var current: Bool
    }

    struct Flash: Sendable {
        var kind: String
        var text: String
    }

    /// An app in a form's app select.
    struct AppOption: Sendable {
        var id: String
        var selected = false
    }

    /// A choice in a form's "By" select.
    struct Choice: Sendable {
        var value: String
        var label: String
        var selected: Bool

        static func list(_ choices: [(value: String, label: String)], selected: String) -> [Choice] {
            choices.map { Choice(value: $0.value, label: $0.label, selected: $0.value == selected) }
        }
    }

    struct LoginView: Sendable {
        var loginCheck: String
    }

    struct MessageView: Sendable {
        var message: String
    }

    // MARK: Overview

    struct OverviewView: Sendable {
        var readyText: String
        var readyClass: String
        var schemaVersion: String
        var generatedAt: String?
        var apps: [AppOverviewView] = []
    }

    /// One app's numbers: rates of the last complete minute, the hour's outcomes, queue and backlogs.
    struct AppOverviewView: Sendable {
        var app: String
        var webhookRate: String
        var pushRate: String
        var lastHour: OperatorController<AppRequestContext>.Activity
        var queue: OperatorController<AppRequestContext>.Queue
        var zendeskBacklog: Int
        var eventsBacklog: Int

        init(_ app: OperatorController<AppRequestContext>.AppOverview) {
            // The last complete minute, as a per-second rate.
            let previous = app.minutes.count >= 2 ? app.minutes[app.minutes.count - 2].activity : .init()
            let rate = { (count: Int64) -> String in
                let perSecond = Double(count) / 60
                return String(format: perSecond < 10 ? "%.2f" : "%.0f", perSecond)
            }
            self.app = app.app
            webhookRate = rate(previous.webhooks)
            pushRate = rate(previous.delivered)
            lastHour = app.lastHour
            queue = app.queue
            zendeskBacklog = app.zendeskBacklog
            eventsBacklog = app.eventsBacklog
        }
    }

    // MARK: Find

    struct FindView: Sendable {
        var appOptions: [AppOption]
        var byOptions: [Choice]
        var q: String
        var notification: NotificationView?
        var ticket: TicketView?
        var device: DeviceHistoryView?
        var nextPage: String?
    }

    struct TicketView: Sendable {
        var ticketID: String
        var notifications: [NotificationView]
        var empty: Bool
    }

    struct DeviceHistoryView: Sendable {
        var deliveries: [DeliveryView]
        var empty: Bool
    }

    struct NotificationView: Sendable {
        struct StatusCount: Sendable {
            var status: String
            var count: Int
        }

        var id: String
        var ticketID: String
        var title: String
        /// Why there is no title: the app's content mode kept no text, or it was erased.
        var textNote: String?
        var createdAt: String
        var counts: [StatusCount]
        var deliveries: [DeliveryView]
        var link: String
        var ticketLink: String

        init(_ notification: NotificationStatusRecord, app: String) {
            id = String(notification.id)
            ticketID = notification.ticketID
            title = notification.title ?? ""
            switch notification.text {
            case "not_stored": textNote = "Text not stored: the app's push content is generic"
            case "erased": textNote = "Text erased once delivered: the app's push content is encrypted"
            default: textNote = nil
            }
            createdAt = ConsoleView.time(notification.createdAt)
            counts = notification.counts.filter { $0.value > 0 }.sorted { $0.key < $1.key }.map {
                StatusCount(status: $0.key, count: $0.value)
            }
            deliveries = (notification.deliveries ?? []).map(DeliveryView.init)
            link = "/console/find?app=\(ConsoleView.segment(app))&by=notification&q=\(id)"
            ticketLink =
                "/console/find?app=\(ConsoleView.segment(app))&by=ticket&q=\(ConsoleView.segment(ticketID))"
        }
    }

    /// One delivery as a timeline: queued, the attempts with the last reason, the outcome.
    struct DeliveryView: Sendable {
        var id: String
        var status: String
        var platform: String
        var token: String
        var kind: String
        var createdAt: String
        var updatedAt: String
        var `final`: Bool
        var attempts: String?
        var reason: String?
        var providerID: String?
        var notificationID: String?

        init(_ delivery: DeliveryStatusRecord) {
            id = String(delivery.id)
            status = delivery.status
            platform = delivery.platform
            token = delivery.token
            kind = delivery.kind.replacingOccurrences(of: "_", with: " ")
            createdAt = ConsoleView.time(delivery.createdAt)
            updatedAt = ConsoleView.time(delivery.updatedAt)
            final = !["pending", "sending"].contains(delivery.status)
            if delivery.attempts > 0 {
                attempts = delivery.attempts == 1 ? "1 attempt" : "\(delivery.attempts) attempts"
            }
            reason = delivery.lastReason
            providerID = delivery.providerID
            notificationID = delivery.notificationID.map { String($0) }
        }
    }

    // MARK: Devices

    struct DevicesView: Sendable {
        var appOptions: [AppOption]
        var byOptions: [Choice]
        var q: String
        var notFound = false
        var searched = false
        var devices: [DeviceRow] = []
        var unread: UnreadView?
        var unreadError: String?
    }

    struct DeviceRow: Sendable {
        var token: String
        var tokenShort: String
        var platform: String
        var user: String
        var status: String
        var active: Bool
        var updatedAt: String
        var reason: String?
        var unregisterLink: String

        init(_ device: Device, app: String) {
            token = device.token
            tokenShort = Redaction.token(device.token)
            platform = device.platform.rawValue
            user = device.userID ?? "(none)"
            status = device.status.rawValue
            active = device.status == .active
            updatedAt = ConsoleView.time(device.updatedAt)
            reason = device.invalidReason
            unregisterLink =
                "/console/devices/unregister?app=\(ConsoleView.segment(app))&token=\(ConsoleView.segment(device.token))"
        }
    }

    struct UnreadView: Sendable {
        var owner: String
        var total: Int
        var tickets: [UnreadSummary.Ticket]
    }

    struct UnregisterView: Sendable {
        var app: String
        var token: String
        var tokenShort: String
        var back: String

        init(app: String, token: String) {
            self.app = app
            self.token = token
            tokenShort = Redaction.token(token)
            back =
                "/console/devices?app=\(ConsoleView.segment(app))&by=token&q=\(ConsoleView.segment(token))"
        }
    }

    // MARK: Jobs

    struct JobsView: Sendable {
        var appOptions: [AppOption]
        var admin = false
        var jobs: [JobRow] = []
    }

    struct JobRow: Sendable {
        var id: String
        var app: String
        var status: String
        var total: Int
        var processed: Int
        var removed: Int
        var notFound: Int
        var failed: Int
        var forwarded: Int
        var createdAt: String
        var percent: Int
        var cancellable: Bool
        var error: String?

        init(_ job: Job) {
            id = job.id.uuidString
            app = job.appID
            status = job.status.rawValue
            total = job.total
            processed = job.processed
            removed = job.removed
            notFound = job.notFound
            failed = job.failed
            forwarded = job.forwarded
            createdAt = ConsoleView.time(job.createdAt)
            percent = job.total > 0 ? job.processed * 100 / job.total : 0
            cancellable = job.status == .queued || job.status == .running
            error = job.error
        }
    }

    // MARK: Apps

    struct AppsView: Sendable {
        var apps: [AppRow] = []
        /// Admin keys: every app with its source, from `GET /v1/admin/apps`.
        var admin = false
        var managedEnabled = false
        var managedMessage: String?
        var all: [AdminAppRow] = []
        /// The add-or-replace form's values (kept when the API refuses them).
        var draftID = ""
        var draft = ""
    }

    /// An app of `GET /v1/admin/apps`: where it comes from and its secrets' fingerprints.
    struct AdminAppRow: Sendable {
        var id: String
        var source: String
        var managed: Bool
        var secrets: [SecretIdentifier]
        var version: String
        var updatedAt: String
        var configuration: String
        /// Why a managed app is not served, if it is not.
        var problem: String?

        init(_ app: AppAdminController<AppRequestContext>.AppView) {
            id = app.id
            source = app.source
            managed = app.source == "managed"
            secrets = app.secrets
            version = app.version.map { String($0) } ?? ""
            updatedAt = app.updatedAt.map(ConsoleView.time) ?? ""
            configuration = app.configuration.json
            problem = app.problem
        }
    }

    /// An app's configuration as loaded (secrets as fingerprints) and its credentials' state.
    struct AppRow: Sendable {
        struct Setting: Sendable {
            var label: String
            var value: String
        }

        struct CredentialRow: Sendable {
            struct Rejection: Sendable {
                var at: String
                var reason: String
            }

            var platform: String
            var kind: String
            var lastRefresh: String
            var expiresAt: String
            var rejection: Rejection?
        }

        var id: String
        var settings: [Setting] = []
        var credentials: [CredentialRow]

        init(_ app: OperatorController<AppRequestContext>.AppView) {
            id = app.id
            var settings: [Setting] = []
            let add = { (label: String, value: String?) in
                if let value { settings.append(Setting(label: label, value: value)) }
            }
            for secret in app.secrets {
                add("Secret \(secret.label)", secret.fingerprint)
            }
            add("User tokens (key file)", app.userTokens?["secret_file"])
            for (fields, label) in [(app.apns, "APNs"), (app.fcm, "FCM"), (app.zendesk, "Zendesk")] {
                for (key, value) in (fields ?? [:]).sorted(by: { $0.key < $1.key }) {
                    add("\(label) \(key.replacingOccurrences(of: "_", with: " "))", value)
                }
            }
            if let events = app.events {
                add("Events URL", events.url)
                add("Events types", events.types.joined(separator: ", "))
                add("Events signing secret file", events.signingSecretFile)
            }
            self.settings = settings
            credentials = app.credentials.map { credential in
                CredentialRow(
                    platform: credential.platform,
                    kind: credential.kind.replacingOccurrences(of: "_", with: " "),
                    lastRefresh: credential.lastRefresh.map(ConsoleView.time) ?? "never (no push sent yet)",
                    expiresAt: credential.expiresAt.map(ConsoleView.time) ?? "",
                    rejection: credential.lastRejection.map {
                        CredentialRow.Rejection(at: ConsoleView.time($0.at), reason: $0.reason)
                    }
                )
            }
        }
    }
}

/// The Overview's minutes, read back: ``OperatorController/Minute/encode(to:)`` writes the
/// activity's fields beside `minute`.
extension OperatorController.Minute: Decodable {
    init(from decoder: any Decoder) throws {
        self.init(
            minute: try decoder.container(keyedBy: Key.self).decode(Date.self, forKey: .minute),
            activity: try OperatorController.Activity(from: decoder)
        )
    }
}
