import Configuration
import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
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
    }

    private let read: ReadConfiguration
    private let parts: Parts
    private let logger: Logger
    private var apps: [AppConfiguration]
    /// Every non-app setting as read at start, shown form (secrets by fingerprint).
    private let startSettings: [String: String]

    init(read: @escaping ReadConfiguration, parts: Parts, apps: [AppConfiguration], startSettings: [String: String], logger: Logger) {
        self.read = read
        self.parts = parts
        self.apps = apps
        self.startSettings = startSettings
        self.logger = logger
    }

    /// The settings `reader` holds, by key, in a form that shows a change without showing a secret.
    static func settings(of recorder: AccessRecorder) -> [String: String] {
        var settings: [String: String] = [:]
        for read in recorder.events where read.key != "config.file" {
            if let value = read.value, value.isSecret {
                settings[read.key] = Fingerprint.of("\(value.content)")
            } else {
                settings[read.key] = read.shownValue
            }
        }
        return settings
    }

    /// Reads the configuration again and puts its apps in use, or refuses it whole.
    @discardableResult
    public func reload(trigger: String) async throws -> Outcome {
        let started = ContinuousClock.now
        let recorder = AccessRecorder()
        let next: [AppConfiguration]
        do {
            let reader = try await read(recorder)
            next = try await AppConfiguration.loadChecked(reader: reader)
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
        apps = next
        var metadata: Logger.Metadata = [
            "trigger": "\(trigger)", "apps": "\(outcome.apps.joined(separator: ","))",
            "duration_ms": "\(Int(((ContinuousClock.now - started) / .milliseconds(1)).rounded()))",
        ]
        if !outcome.added.isEmpty { metadata["added"] = "\(outcome.added.joined(separator: ","))" }
        if !outcome.removed.isEmpty { metadata["removed"] = "\(outcome.removed.joined(separator: ","))" }
        if !outcome.changed.isEmpty { metadata["changed"] = "\(outcome.changed.joined(separator: ","))" }
        if !outcome.restartNeeded.isEmpty { metadata["restart_needed"] = "\(outcome.restartNeeded.joined(separator: ","))" }
        logger.notice("configuration reloaded", metadata: metadata)
        return outcome
    }

    /// Builds every part's new state from `apps` (the step that may fail), then switches them all.
    private func install(_ apps: [AppConfiguration]) async throws {
        let directory = try await AppDirectory.prepare(apps: apps)
        let providers = try await parts.providers.prepare(apps: apps)
        let zendesk: [ZendeskForwarder.Target]
        let events: [String: EventForwarder.Target]
        let eventTargets = apps.compactMap { app in app.events.map { (id: app.id, events: $0) } }
        do {
            zendesk = try ZendeskForwarder.targets(apps.compactMap { app in app.zendesk.map { (id: app.id, zendesk: $0) } })
            events = try EventForwarder.targets(eventTargets)
        } catch {
            await parts.providers.discard(providers)
            throw error
        }
        // Providers before the dispatcher claims for a new app; the directory last, so a webhook
        // for a new app is accepted once the rest can handle it.
        parts.providers.install(providers)
        parts.dispatcher.update(apps: parts.deliveryEnabled ? apps.map(\.id) : [], events: EventForwarder.wanted(by: eventTargets))
        parts.zendesk.update(zendesk)
        parts.events.update(events)
        parts.directory.install(directory)
        parts.authenticator.appsReloaded()
    }
}

/// Reloads the configuration on SIGHUP (what `systemctl reload` sends).
struct ReloadOnHangUp: Service {
    let reloader: ConfigurationReloader?
    let logger: Logger

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sighup)
        await cancelWhenGracefulShutdown {
            for await _ in signals {
                guard let reloader else {
                    logger.warning("SIGHUP received: nothing to reload (this relay was started without a configuration file)")
                    continue
                }
                // A refused file is logged by the reloader; the relay goes on as it was.
                _ = try? await reloader.reload(trigger: "SIGHUP")
            }
        }
    }
}

/// `POST /v1/admin/reload` (admin keys): reloads the configuration and answers what changed, or
/// 422 `configuration_invalid` with the reason and nothing changed.
struct ReloadController<Context: RequestContext>: Sendable {
    let reloader: ConfigurationReloader?
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
        guard let reloader else {
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
