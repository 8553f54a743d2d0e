import Configuration
import Foundation
import Hummingbird
import Logging
import Postgres
import ServiceLifecycle
import Synchronization
import UnixSignals

/// Re-reads the configuration and puts its apps in use without a restart (SIGHUP, `systemctl
/// reload`, `POST /v1/admin/reload`).
///
/// All or nothing: the file is read and checked as at start (unknown keys, types, every app's
/// secrets and credential files), every part is built, and only then does each part switch to
/// its new apps. A file that fails any check is refused as a whole with one error line, and the
/// apps in use keep serving. What a reload changes: apps added and removed, webhook secrets and
/// signing secrets, user-token keys, APNs and FCM credentials, Zendesk accounts, feedback event
/// receivers and their secrets, and the webhook limits `webhooks.max_devices` and
/// `webhooks.signature_tolerance_seconds`. Other settings (ports, pools, batch sizes) are read at start only;
/// a reload that finds them changed says which, and they take effect at the next restart.
public actor ConfigurationReloader {
    /// A configuration reader made the way `serve` made its own; the recorder sees every setting.
    public typealias ReadConfiguration = @Sendable (AccessRecorder) async throws -> ConfigReader

    /// What a reload did.
    public struct Outcome: Sendable, Codable, Equatable {
        public var apps: [String]
        public var added: [String]
        public var removed: [String]
        public var changed: [String]
        /// Settings whose new value is not applied until a restart.
        public var restartNeeded: [String]

        enum CodingKeys: String, CodingKey {
            case apps, added, removed, changed
            case restartNeeded = "restart_needed"
        }
    }

    /// The reload was refused; the configuration in use is unchanged.
    public struct Refused: Error, CustomStringConvertible {
        public var description: String
    }

    /// The parts that hold apps.
    struct Parts: Sendable {
        var directory: AppDirectory
        var providers: ProviderSet
        var dispatcher: Dispatcher
        var zendesk: ZendeskForwarder
        var events: EventForwarder
        var authenticator: Authenticator
        var webhooks: WebhookSettings
        var deliveryEnabled: Bool
        /// Where a removed app's queued deliveries are ended.
        var outbox: DeliveryQueue
    }

    /// `nil` when the relay was started without a configuration file (the demo, tests).
    private let read: ReadConfiguration?
    private let parts: Parts
    private let logger: Logger
    /// The file's apps in use, also read by the admin API (which refuses to change them).
    private let fileApps: FileApps
    private let managed: ManagedAppStore?
    /// The managed apps in use.
    private var managedApps: [AppConfiguration]
    /// Every non-app setting as read at start, shown form (secrets by fingerprint).
    private let startSettings: [String: String]
    /// Whether a reload is between its first read and its install. The actor alone does not
    /// serialise them: each awaits (the file, the managed apps, the parts' preparation), and an
    /// older managed-app set read by one could be installed over a newer one another installed.
    private var reloading = false
    /// Reloads waiting for the one in progress, first come first served.
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(
        read: ReadConfiguration?,
        parts: Parts,
        fileApps: FileApps,
        managed: ManagedAppStore?,
        managedAtStart: [AppConfiguration],
        startSettings: [String: String],
        logger: Logger
    ) {
        self.read = read
        self.parts = parts
        self.fileApps = fileApps
        self.managed = managed
        self.managedApps = managedAtStart
        self.startSettings = startSettings
        self.logger = logger
    }

    /// Logs each managed app skipped because it cannot be served; the others are served.
    static func report(_ unusable: [ManagedAppStore.Unusable], logger: Logger) {
        for app in unusable {
            logger.error(
                "a managed app is skipped: it cannot be served; the other apps are",
                metadata: ["push.app": "\(app.id)", "error": "\(app.problem)"]
            )
        }
    }

    /// The apps served: the file's, then the managed ones whose id the file does not use (the
    /// admin API refuses such ids, but a file may add one later; the file's app wins, with a
    /// warning).
    static func merge(file: [AppConfiguration], managed: [AppConfiguration], logger: Logger) -> [AppConfiguration] {
        let ids = Set(file.map(\.id))
        for app in managed where ids.contains(app.id) {
            logger.warning(
                "a managed app has the id of an app in the configuration file; the file's app is served",
                metadata: ["push.app": "\(app.id)"]
            )
        }
        return file + managed.filter { !ids.contains($0.id) }
    }

    private var apps: [AppConfiguration] {
        Self.merge(file: fileApps.apps, managed: managedApps, logger: Logger(label: "push-relay.quiet"))
    }

    /// The settings `reader` holds, by key, in a form that shows a change without showing a secret.
    static func settings(of recorder: AccessRecorder) -> [String: String] {
        var settings: [String: String] = [:]
        for read in recorder.events where read.key != "config.file" {
            if let value = read.value, value.isSecret {
                settings[read.key] = SecretIdentifier.fingerprint("\(value.content)")
            } else {
                settings[read.key] = read.shownValue
            }
        }
        return settings
    }

    /// Waits until no other reload is in progress, then holds the turn until ``endTurn()``.
    private func takeTurn() async {
        guard reloading else {
            reloading = true
            return
        }
        logger.debug("configuration reload waits for the one in progress")
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Hands the turn to the next waiting reload, if any.
    private func endTurn() {
        if waiting.isEmpty {
            reloading = false
        } else {
            waiting.removeFirst().resume()
        }
    }

    /// Reads the configuration again and puts its apps in use, or refuses it whole. Reloads of the
    /// file and of the managed apps run one at a time, each reading what it installs after the
    /// previous one installed.
    @discardableResult
    public func reload(trigger: String) async throws -> Outcome {
        await takeTurn()
        defer { endTurn() }
        let started = ContinuousClock.now
        let recorder = AccessRecorder()
        let next: [AppConfiguration]
        let nextFile: [AppConfiguration]
        let nextManaged: [AppConfiguration]
        do {
            guard let read else {
                throw ConfigurationError(
                    "this relay was started without a configuration file; there is nothing to reload"
                )
            }
            if let listing = try await managed?.records() {
                Self.report(listing.unusable, logger: logger)
                nextManaged = listing.apps
            } else {
                nextManaged = managedApps
            }
            let reader = try await read(recorder)
            nextFile = try await AppConfiguration.loadChecked(reader: reader)
            next = Self.merge(file: nextFile, managed: nextManaged, logger: logger)
            try await install(next)
            parts.webhooks.applyLimits(of: WebhookSettings(config: reader.scoped(to: "webhooks")))
        } catch {
            let message = "\(error)"
            logger.error(
                "configuration reload refused; the configuration in use is unchanged",
                metadata: ["trigger": "\(trigger)", "error": "\(message)"]
            )
            throw Refused(description: message)
        }
        let old = Dictionary(uniqueKeysWithValues: apps.map { ($0.id, $0) })
        fileApps.apps = nextFile
        managedApps = nextManaged
        let new = Dictionary(uniqueKeysWithValues: next.map { ($0.id, $0) })
        let settings = Self.settings(of: recorder)
        let outcome = Outcome(
            apps: next.map(\.id).sorted(),
            added: new.keys.filter { old[$0] == nil }.sorted(),
            removed: old.keys.filter { new[$0] == nil }.sorted(),
            changed: new.keys.filter { id in old[id].map { $0 != new[id] } ?? false }.sorted(),
            restartNeeded: Set(settings.keys).union(startSettings.keys).subtracting(WebhookSettings.reloadableKeys)
                .filter { settings[$0] != startSettings[$0] }.sorted()
        )
        // Every field on every line, empty when nothing changed: a log query need not guess.
        let metadata: Logger.Metadata = [
            "trigger": "\(trigger)", "apps": "\(outcome.apps.joined(separator: ","))",
            "duration_ms": "\(Int(((ContinuousClock.now - started) / .milliseconds(1)).rounded()))",
            "added": "\(outcome.added.joined(separator: ","))", "removed": "\(outcome.removed.joined(separator: ","))",
            "changed": "\(outcome.changed.joined(separator: ","))",
            "restart_needed": "\(outcome.restartNeeded.joined(separator: ","))",
        ]
        logger.notice("configuration reloaded", metadata: metadata)
        await endDeliveries(ofRemovedApps: outcome.removed, trigger: "\(trigger)")
        return outcome
    }

    /// Reads the managed apps again (a NOTIFY from an admin API change on any instance) and puts
    /// them in use beside the file's; nothing happens when they did not change. A set that fails
    /// its checks is refused whole, with one error line, and the apps in use serve on.
    func reloadManaged() async {
        guard let managed else { return }
        await takeTurn()
        defer { endTurn() }
        let next: [AppConfiguration]
        do {
            let listing = try await managed.records()
            next = listing.apps
            guard next != managedApps else { return }
            Self.report(listing.unusable, logger: logger)
            let old = Set(managedApps.map(\.id))
            let served = Set(apps.map(\.id))
            let merged = Self.merge(file: fileApps.apps, managed: next, logger: logger)
            try await install(merged)
            logger.notice(
                "managed apps reloaded",
                metadata: [
                    "apps": "\(next.map(\.id).sorted().joined(separator: ","))",
                    "added": "\(next.map(\.id).filter { !old.contains($0) }.sorted().joined(separator: ","))",
                    "removed": "\(old.subtracting(next.map(\.id)).sorted().joined(separator: ","))",
                ]
            )
            managedApps = next
            await endDeliveries(ofRemovedApps: served.subtracting(merged.map(\.id)).sorted(), trigger: "managed")
        } catch {
            logger.error(
                "managed apps not reloaded; the apps in use are unchanged",
                metadata: PostgresError.metadata(error)
            )
        }
    }

    /// Ends the queued deliveries of apps no longer served (``DeliveryQueue/endDeliveries(ofRemovedApps:)``):
    /// nothing would send them, and an encrypted app's text would stay. Every instance that
    /// removes the app runs it (the first ends them; the others find none). A failure is logged:
    /// retention ends what is left once it is older than any instance would send
    /// (``RetentionService``).
    private func endDeliveries(ofRemovedApps removed: [String], trigger: String) async {
        guard !removed.isEmpty else { return }
        do {
            let (ended, erased) = try await parts.outbox.endDeliveries(ofRemovedApps: removed)
            logger.notice(
                "queued deliveries of removed apps ended",
                metadata: [
                    "trigger": "\(trigger)", "removed": "\(removed.joined(separator: ","))",
                    "push.deliveries_ended": "\(ended)",
                    "push.texts_erased": "\(erased)",
                ]
            )
        } catch {
            logger.log(
                level: PostgresError.logLevel(for: error),
                "queued deliveries of removed apps not ended; retention ends them once past delivery.max_age_seconds",
                metadata: PostgresError.metadata(
                    error,
                    ["trigger": "\(trigger)", "removed": "\(removed.joined(separator: ","))"]
                )
            )
        }
    }

    /// Builds every part's new state from `apps` (the step that may fail), then switches them all.
    private func install(_ apps: [AppConfiguration]) async throws {
        let directory = try await AppDirectory.prepare(apps: apps)
        let providers = try await parts.providers.prepare(apps: apps)
        let zendesk: [ZendeskForwarder.Target]
        let events: [String: EventForwarder.Target]
        let eventTargets = apps.compactMap { app in app.events.map { (id: app.id, events: $0) } }
        do {
            zendesk = try ZendeskForwarder.targets(
                apps.compactMap { app in app.zendesk.map { (id: app.id, zendesk: $0) } }
            )
            events = try EventForwarder.targets(eventTargets)
        } catch {
            await parts.providers.discard(providers)
            throw error
        }
        // Providers before the dispatcher claims for a new app; the directory last, so a webhook
        // for a new app is accepted once the rest can handle it.
        parts.providers.install(providers)
        parts.dispatcher.update(
            apps: parts.deliveryEnabled ? apps.map(\.id) : [],
            events: EventForwarder.wanted(by: eventTargets)
        )
        parts.zendesk.update(zendesk)
        parts.events.update(events)
        parts.directory.install(directory)
        parts.authenticator.appsReloaded()
    }
}

/// The file's apps in use: what the admin API shows as read-only, and the ids it refuses.
final class FileApps: Sendable {
    private let current: Mutex<[AppConfiguration]>

    init(_ apps: [AppConfiguration]) { current = Mutex(apps) }

    var apps: [AppConfiguration] {
        get { current.withLock { $0 } }
        set { current.withLock { $0 = newValue } }
    }

    var ids: Set<String> { Set(apps.map(\.id)) }
}

/// Reloads the configuration on SIGHUP (what `systemctl reload` sends).
struct ReloadOnHangUp: Service {
    let reloader: ConfigurationReloader
    let logger: Logger

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        await cancelWhenGracefulShutdown {
            for await _ in signals {
                // A refused file is logged by the reloader; the relay goes on as it was.
                _ = try? await reloader.reload(trigger: "SIGHUP")
            }
        }
    }
}

/// Puts a change to the managed apps in use on this instance: at each `NOTIFY push_relay_apps`
/// (sent in the changing transaction, from any instance or psql), and, in case a notification
/// was missed (the LISTEN connection was down), whenever the stored generation moved, checked
/// every second.
struct ManagedAppWatcher: Service {
    let store: ManagedAppStore
    let reloader: ConfigurationReloader
    let changes: AsyncStream<PostgresListenerEvent>
    /// Times the generation check.
    var clock: RelayClock = .system

    func run() async throws {
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask {
                    for await _ in changes { await reloader.reloadManaged() }
                }
                group.addTask {
                    var seen = try? await store.generation()
                    while !Task.isCancelled {
                        try? await clock.sleep(for: .seconds(1))
                        guard let generation = try? await store.generation(), generation != seen else { continue }
                        seen = generation
                        await reloader.reloadManaged()
                    }
                }
            }
        }
    }
}

/// `POST /v1/admin/reload` (admin keys): reloads the configuration and answers what changed, or
/// 422 `configuration_invalid` with the reason and nothing changed.
struct ReloadController<Context: RequestContext>: Sendable {
    let reloader: ConfigurationReloader?
    /// Whether the relay was started from a configuration file it can read again.
    var reloadable = true
    let authenticator: Authenticator

    var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self).post("/v1/admin/reload", use: reload)
    }

    struct Answer: ResponseEncodable {
        var status: String
        var apps: [String]
        var added: [String]
        var removed: [String]
        var changed: [String]
        var restartNeeded: [String]

        enum CodingKeys: String, CodingKey {
            case status, apps, added, removed, changed
            case restartNeeded = "restart_needed"
        }
    }

    @Sendable func reload(_ request: Request, context: Context) async throws -> Answer {
        try await authenticator.resolve(request).requireAdmin()
        guard let reloader, reloadable else {
            throw APIError(
                .conflict,
                code: "reload_unavailable",
                message: "this relay was started without a configuration file; there is nothing to reload"
            )
        }
        do {
            let outcome = try await reloader.reload(trigger: "admin API")
            return Answer(
                status: "reloaded",
                apps: outcome.apps,
                added: outcome.added,
                removed: outcome.removed,
                changed: outcome.changed,
                restartNeeded: outcome.restartNeeded
            )
        } catch let refused as ConfigurationReloader.Refused {
            throw APIError(
                .unprocessableContent,
                code: "configuration_invalid",
                message: "the configuration was refused and the one in use is unchanged: \(refused.description)"
            )
        }
    }
}
