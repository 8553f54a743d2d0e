import Configuration
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import Postgres

/// Builds the PushRelay application from configuration.
///
/// Keys (docs/configuration.md lists them all): `http.*` (``HTTPSettings``, ``ConnectionLimits``),
/// `database.*` (``DatabaseSettings``), `webhooks.*` (``WebhookSettings``), `delivery.*` and
/// `tls.ca_file` (``DeliverySettings``), `zendesk.*` (``ZendeskForwarderSettings``), `jobs.*`
/// (``JobSettings``), `unread.*` (``UnreadSettings``), `events.*` (``EventForwarderSettings``),
/// `retention.*` (``RetentionSettings``), `data.directory` (default
/// `./.push-relay-data`, where the embedded cluster lives when `database.url` is not set),
/// `apps_store.*` (``ManagedAppStoreSettings``: the key of the apps managed through the admin API)
/// and `config.file`, whose `apps:` list is read when `apps` is not given.
///
/// The logger is passed in: logging is bootstrapped once, by the executable, never here.
///
/// `reload` makes the configuration reloadable (SIGHUP, `POST /v1/admin/reload`, `push-relay reload
/// --pid` through ``ControlSocket``): it reads the
/// configuration again the way `reader` was made. Without it a reload is refused.
public func buildApplication(
    reader: ConfigReader,
    logger: Logger,
    apps: [AppConfiguration]? = nil,
    reload: ConfigurationReloader.ReadConfiguration? = nil
) async throws -> some ApplicationProtocol {
    try await buildApplication(reader: reader, logger: logger, apps: apps, reload: reload, clock: .system)
}

/// ``buildApplication(reader:logger:apps:reload:)`` with the clock its parts wait on (tests pass
/// one they move).
func buildApplication(
    reader: ConfigReader,
    logger: Logger,
    apps: [AppConfiguration]?,
    reload: ConfigurationReloader.ReadConfiguration?,
    clock: RelayClock
) async throws -> some ApplicationProtocol {
    let fileApps: [AppConfiguration]
    if let apps { fileApps = apps } else { fileApps = try await AppConfiguration.loadChecked(reader: reader) }
    let appsStore = try ManagedAppStoreSettings(config: reader.scoped(to: "apps_store"))
    let database = try await Database.open(reader: reader, logger: logger, now: clock.now)
    // The one cleanup path: whatever fails once the database is open closes the pool (and stops
    // an embedded server this process started).
    do {
        if reader.bool(forKey: "database.migrate_on_start", default: true) {
            try await database.migrateWaiting(
                upTo: .seconds(max(0, reader.int(forKey: "database.start_wait_seconds", default: 60))),
                logger: logger
            )
        }
        let appsAtStart = try await AppsAtStart.load(
            file: fileApps,
            store: appsStore,
            database: database,
            logger: logger
        )
        let parts = try await RelayParts(
            reader: reader,
            logger: logger,
            database: database,
            apps: appsAtStart,
            appsStore: appsStore,
            clock: clock
        )
        let reloader = try await parts.reloader(reload, apps: appsAtStart, logger: logger)
        return try parts.application(reader: reader, reloader: reloader, reloadable: reload != nil, logger: logger)
    } catch {
        try? await database.shutdown()
        throw error
    }
}

/// The apps served from the start: the file's and, with an `apps_store` key, those managed
/// through the admin API.
struct AppsAtStart {
    let file: [AppConfiguration]
    /// The file's apps as a reload replaces them.
    let fileNow: FileApps
    let managed: ManagedAppStore?
    /// Both, merged: a managed app whose id the file also uses is left out.
    let configured: [AppConfiguration]
    let directory: AppDirectory

    static func load(
        file: [AppConfiguration],
        store: ManagedAppStoreSettings,
        database: Database,
        logger: Logger
    ) async throws -> AppsAtStart {
        let fileNow = FileApps(file)
        let managed = store.key.map { key in
            ManagedAppStore(
                client: database.client,
                key: key,
                previousKey: store.previousKey,
                fileAppIDs: { fileNow.ids }
            )
        }
        let listing = try await managed?.records()
        ConfigurationReloader.report(listing?.unusable ?? [], logger: logger)
        let configured = ConfigurationReloader.merge(file: file, managed: listing?.apps ?? [], logger: logger)
        if configured.isEmpty {
            logger.warning(
                "no apps are configured; webhooks will be refused until the configuration file lists some under apps:"
            )
        }
        return AppsAtStart(
            file: file,
            fileNow: fileNow,
            managed: managed,
            configured: configured,
            directory: try await AppDirectory(apps: configured)
        )
    }
}

/// The relay's long-lived parts, made from the configuration in the order they depend on each
/// other; ``application(reader:reloader:reloadable:logger:)`` wires them into the server.
struct RelayParts {
    let database: Database
    let apps: AppsAtStart
    let metrics = RelayMetrics()
    let webhooks: WebhookSettings
    let delivery: DeliverySettings
    let providers: ProviderSet
    /// One connection in LISTEN for the dispatcher, the unread hub, the job runner and the apps watcher.
    let listener: PostgresListener
    let forwarder: ZendeskForwarder
    let eventForwarder: EventForwarder
    let dispatcher: Dispatcher
    let writer: IntakeWriter
    let hub: UnreadHub
    let keys: APIKeyStore
    let sessions: ConsoleSessionStore
    let console: ConsoleSettings
    let authenticator: Authenticator
    /// Seals devices' push keys at rest and opens them for encrypted pushes.
    let deviceKeys: DevicePushKeys
    /// What the parts wait on and read the time from (``RelayClock/system`` but in tests).
    let clock: RelayClock

    init(
        reader: ConfigReader,
        logger: Logger,
        database: Database,
        apps: AppsAtStart,
        appsStore: ManagedAppStoreSettings,
        clock: RelayClock = .system
    ) async throws {
        self.database = database
        self.clock = clock
        deviceKeys = DevicePushKeys(settings: appsStore)
        self.apps = apps
        webhooks = WebhookSettings(config: reader.scoped(to: "webhooks"))
        delivery = DeliverySettings(config: reader.scoped(to: "delivery"), tls: reader.scoped(to: "tls"))
        providers = try await ProviderSet(
            apps: apps.configured,
            settings: delivery,
            tokens: ProviderTokenStore(client: database.client, sealer: appsStore.providerTokenSealer, clock: clock),
            deviceKeys: deviceKeys
        )
        listener = try PostgresListener(
            conninfo: database.client.configuration.conninfo,
            channels: [DeliveryQueue.channel, UnreadChannel.name, JobStore.channel, ManagedAppStore.channel],
            settings: database.client.configuration.connection,
            probeInterval: database.listenerProbeInterval,
            reportingTo: database.client,
            logger: logger
        )
        forwarder = try ZendeskForwarder(
            client: database.client,
            apps: apps.configured.compactMap { app in app.zendesk.map { (id: app.id, zendesk: $0) } },
            settings: ZendeskForwarderSettings(config: reader.scoped(to: "zendesk")),
            caFile: delivery.caFile,
            metrics: metrics,
            logger: logger,
            clock: clock
        )
        let eventTargets = apps.configured.compactMap { app in app.events.map { (id: app.id, events: $0) } }
        eventForwarder = try EventForwarder(
            client: database.client,
            apps: eventTargets,
            settings: EventForwarderSettings(config: reader.scoped(to: "events")),
            caFile: delivery.caFile,
            metrics: metrics,
            logger: logger,
            clock: clock
        )
        let outbox = DeliveryQueue(client: database.client)
        dispatcher = Dispatcher(
            queue: outbox,
            providers: providers,
            settings: delivery,
            apps: delivery.enabled ? apps.configured.map(\.id) : [],
            wakeUps: listener.events(on: [DeliveryQueue.channel]),
            events: EventForwarder.wanted(by: eventTargets),
            metrics: metrics,
            logger: logger,
            clock: clock
        )
        writer = IntakeWriter(
            queue: outbox,
            logger: logger,
            settings: webhooks,
            dispatcher: delivery.enabled ? dispatcher : nil,
            clock: clock
        )
        hub = UnreadHub(
            events: listener.events(on: [UnreadChannel.name]),
            settings: UnreadSettings(config: reader.scoped(to: "unread")),
            clock: clock
        )
        console = ConsoleSettings(config: reader.scoped(to: "console"))
        keys = APIKeyStore(client: database.client, cache: APIKeyCache(clock: clock))
        sessions = ConsoleSessionStore(
            client: database.client,
            keys: keys,
            idleTimeout: console.idleTimeout,
            maxLifetime: console.sessionLifetime,
            maxPerKey: console.maxSessionsPerKey
        )
        authenticator = Authenticator(
            keys: keys,
            apps: apps.directory,
            sessions: console.enabled ? sessions : nil,
            clock: clock,
            settings: AuthSettings(config: reader.scoped(to: "auth"))
        )
    }

    /// The reloader of these parts; `read` (`nil`: reloads are refused) is read once now, for the
    /// settings in force, which a reload compares its own with.
    func reloader(
        _ read: ConfigurationReloader.ReadConfiguration?,
        apps: AppsAtStart,
        logger: Logger
    ) async throws -> ConfigurationReloader {
        let startSettings = AccessRecorder()
        if let read { _ = try await read(startSettings) }
        return ConfigurationReloader(
            read: read,
            parts: .init(
                directory: apps.directory,
                providers: providers,
                dispatcher: dispatcher,
                zendesk: forwarder,
                events: eventForwarder,
                authenticator: authenticator,
                webhooks: webhooks,
                deliveryEnabled: delivery.enabled,
                outbox: DeliveryQueue(client: database.client)
            ),
            fileApps: apps.fileNow,
            managed: apps.managed,
            managedAtStart: apps.configured.filter { app in !apps.file.contains { $0.id == app.id } },
            startSettings: ConfigurationReloader.settings(of: startSettings),
            logger: logger
        )
    }

    /// The server: the router, the fast paths in front of it, and the services in start order.
    func application(
        reader: ConfigReader,
        reloader: ConfigurationReloader,
        reloadable: Bool,
        logger: Logger
    ) throws -> some ApplicationProtocol {
        let http = HTTPSettings(config: reader.scoped(to: "http"))
        let limits = ConnectionLimits(config: reader.scoped(to: "http"))
        let jobs = JobSettings(config: reader.scoped(to: "jobs"))
        let serverName = "PushRelay"
        var app = Application(
            router: try router(reader: reader, jobs: jobs, reloader: reloader, reloadable: reloadable),
            server: limits.server(
                logger: logger,
                fastPaths: fastPaths(logger: logger, serverName: serverName),
                metrics: metrics,
                serverName: serverName
            ),
            configuration: .init(
                address: .hostname(http.host, port: http.port),
                serverName: serverName,
                availableConnectionsDelegate: MaximumAvailableConnections(limits.maxConnections, logger: logger)
            ),
            logger: logger
        )
        addServices(to: &app, reader: reader, jobs: jobs, reloader: reloader, reloadable: reloadable, logger: logger)
        return app
    }

    /// The router: the API's routes and, when enabled, the console's pages.
    private func router(
        reader: ConfigReader,
        jobs: JobSettings,
        reloader: ConfigurationReloader,
        reloadable: Bool
    ) throws -> Router<AppRequestContext> {
        let consoleController =
            console.enabled
            ? try ConsoleController(
                keys: keys,
                sessions: sessions,
                settings: console,
                trustedProxies: TrustedProxies(config: reader.scoped(to: "http")),
                clock: clock
            )
            : nil
        let fileApps = apps.fileNow
        return RelayRoutes(
            database: database,
            apps: apps.directory,
            authenticator: authenticator,
            writer: writer,
            webhooks: webhooks,
            hub: hub,
            metrics: metrics,
            console: consoleController,
            maxUploadBytes: jobs.maxUploadBytes,
            devices: DeviceSettings(config: reader.scoped(to: "devices"), pushKeys: deviceKeys),
            reloader: reloader,
            reloadable: reloadable,
            managedApps: apps.managed,
            fileApps: { fileApps.apps }
        ).router().0
    }

    /// The requests answered on the connection's event loop, before the router: well-formed
    /// webhooks and unread polls.
    private func fastPaths(logger: Logger, serverName: String) -> [FastPath] {
        let unreadPolls = UnreadPollShortcut(
            hub: hub,
            authenticator: authenticator,
            metrics: metrics,
            apps: apps.directory.ids,
            logger: logger,
            serverName: serverName
        )
        let webhookPosts = WebhookShortcut(
            apps: apps.directory,
            writer: writer,
            settings: webhooks,
            metrics: metrics,
            logger: logger,
            serverName: serverName
        )
        return [webhookPosts.fastPath, unreadPolls.fastPath]
    }

    /// The services, in start order; shutdown runs in reverse after the HTTP server: the writer
    /// drains, the dispatcher finishes its sends, the listener stops, the pool closes, the
    /// embedded server stops.
    private func addServices(
        to app: inout Application<RouterResponder<AppRequestContext>>,
        reader: ConfigReader,
        jobs: JobSettings,
        reloader: ConfigurationReloader,
        reloadable: Bool,
        logger: Logger
    ) {
        app.addServices(database.services)
        // Added before the dispatcher so it stops after it: its last write carries the outcomes of
        // the sends that finish during shutdown.
        let dispatcher = self.dispatcher
        app.addServices(
            ActivityWriter(
                client: database.client,
                tally: metrics.activity,
                instance: dispatcher.owner,
                inFlight: { dispatcher.inFlightByApp },
                logger: logger
            )
        )
        app.addServices(listener)
        app.addServices(dispatcher)
        app.addServices(hub)
        app.addServices(
            JobRunner(
                store: JobStore(client: database.client),
                wakeUps: listener.events(on: [JobStore.channel]),
                settings: jobs,
                metrics: metrics,
                logger: logger,
                clock: clock
            )
        )
        app.addServices(forwarder)
        app.addServices(eventForwarder)
        app.addServices(
            RetentionService(
                client: database.client,
                settings: RetentionSettings(config: reader.scoped(to: "retention")),
                metrics: metrics,
                logger: logger,
                clock: clock,
                served: { [directory = apps.directory] in directory.ids },
                maxAge: delivery.maxAge
            )
        )
        app.addServices(writer)
        app.addServices(ReloadOnHangUp(reloader: reloader, logger: logger))
        // `push-relay reload --pid` (the units' ExecReload=): a reload that answers.
        if reloadable { app.addServices(ControlSocketService(reloader: reloader, logger: logger)) }
        if let managed = apps.managed {
            app.addServices(
                ManagedAppWatcher(
                    store: managed,
                    reloader: reloader,
                    changes: listener.events(on: [ManagedAppStore.channel]),
                    clock: clock
                )
            )
        }
    }
}

/// What the router is built from, as one value: the composition root fills it from the relay's
/// parts, and the OpenAPI test builds the same router from a few of them to compare the routes it
/// serves with the document.
struct RelayRoutes {
    var database: Database
    var apps: AppDirectory
    var authenticator: Authenticator
    var writer: IntakeWriter
    var webhooks: WebhookSettings
    var hub: UnreadHub
    var metrics: RelayMetrics
    var console: ConsoleController? = nil
    var maxUploadBytes = JobSettings().maxUploadBytes
    var devices = DeviceSettings()
    var reloader: ConfigurationReloader? = nil
    var reloadable = false
    var managedApps: ManagedAppStore? = nil
    /// The apps of the configuration file now; by default, every app of ``apps``.
    var fileApps: (@Sendable () -> [AppConfiguration])? = nil

    /// The routes and middleware, and the list of served routes (checked against the OpenAPI
    /// document).
    func router() -> (Router<AppRequestContext>, [Route]) {
        let router = Router(context: AppRequestContext.self)
        let routes = RouteRecorder(router: router)
        router.addMiddleware {
            RequestIDMiddleware()
            RequestLogMiddleware()
            ErrorMiddleware(routes: routes.recorded)
        }
        if let console {
            // Before any route reads a cookie: over TLS only the console's __Host- cookies count.
            router.addMiddleware { ConsoleCookieMiddleware(console: console) }
        }
        addOperationalRoutes(to: routes)
        addAPIRoutes(to: routes)
        if let console {
            // HTML pages, outside the API's document; they call the API through this router.
            console.addRoutes(to: router)
            console.use(router.buildResponder())
        }
        return (router, routes.recorded.all)
    }

    /// Health, the OpenAPI document, metrics and reload.
    private func addOperationalRoutes(to routes: RouteRecorder<AppRequestContext>) {
        routes.addRoutes(
            HealthController(client: database.client, migrator: database.migrator, version: PushRelayVersion.build)
                .endpoints
        )
        routes.addRoutes(OpenAPIController().endpoints)
        routes.addRoutes(MetricsController(metrics: metrics).endpoints)
        routes.addRoutes(
            ReloadController(reloader: reloader, reloadable: reloadable, authenticator: authenticator).endpoints
        )
    }

    /// Webhooks, devices, jobs, apps, status, unread counts and the operator's reads.
    private func addAPIRoutes(to routes: RouteRecorder<AppRequestContext>) {
        routes.addRoutes(WebhookController(apps: apps, writer: writer, settings: webhooks, metrics: metrics).endpoints)
        routes.addRoutes(
            DeviceController(
                repository: PostgresDeviceRepository(client: database.client),
                authenticator: authenticator,
                settings: devices
            ).endpoints
        )
        routes.addRoutes(
            AdminController(
                store: JobStore(client: database.client),
                authenticator: authenticator,
                maxJSONBytes: 64 << 20,
                maxTextBytes: maxUploadBytes
            ).endpoints
        )
        routes.addRoutes(
            AppAdminController(
                store: managedApps,
                fileApps: fileApps ?? { [apps] in apps.ids.compactMap(apps.app) },
                authenticator: authenticator
            ).endpoints
        )
        routes.addRoutes(
            StatusController(store: DeliveryStatusStore(client: database.client), authenticator: authenticator)
                .endpoints
        )
        routes.addRoutes(
            UnreadController(
                store: UnreadStore(client: database.client),
                hub: hub,
                authenticator: authenticator,
                metrics: metrics
            ).endpoints
        )
        routes.addRoutes(
            OperatorController(store: OperatorStore(client: database.client), apps: apps, authenticator: authenticator)
                .endpoints
        )
    }
}

extension ManagedAppStoreSettings {
    /// Seals the cluster's provider tokens (`provider_tokens`) with the managed apps' key, and
    /// opens them with it or the previous key; `nil` without a key.
    var providerTokenSealer: ProviderTokenStore.Sealer? {
        guard let key else { return nil }
        let previous = previousKey
        let row: @Sendable (String) -> String = { "provider token " + $0 }
        return ProviderTokenStore.Sealer(
            seal: { token, credential in try key.seal(Data(token.utf8), app: row(credential)).base64EncodedString() },
            open: { stored, credential in
                guard let sealed = Data(base64Encoded: stored) else { return nil }
                for candidate in [key] + (previous.map { [$0] } ?? []) {
                    if let plain = try? candidate.open(sealed, app: row(credential)) {
                        return String(decoding: plain, as: UTF8.self)
                    }
                }
                return nil
            }
        )
    }
}
