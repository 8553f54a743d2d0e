import Configuration
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import Postgres

/// Builds the PushRelay application from configuration.
///
/// Keys (docs/configuration.md lists them all): `http.*` (``HTTPConfiguration``, ``ConnectionLimits``),
/// `database.*` (``DatabaseConfiguration``), `webhooks.*` (``WebhookSettings``), `delivery.*` and
/// `tls.ca_file` (``DeliverySettings``), `zendesk.*` (``ZendeskForwarderSettings``), `jobs.*`
/// (``JobSettings``), `unread.*` (``UnreadSettings``), `events.*` (``EventForwarderSettings``),
/// `retention.*` (``RetentionSettings``), `data.directory` (default
/// `./.push-relay-data`, where the embedded cluster lives when `database.url` is not set),
/// `apps_store.*` (``ManagedAppStoreSettings``: the key of the apps managed through the admin API)
/// and `config.file`, whose `apps:` list is read when `apps` is not given.
///
/// The logger is passed in: logging is bootstrapped once, by the executable, never here.
///
/// `reload` makes the configuration reloadable (SIGHUP, `POST /v1/admin/reload`): it reads the
/// configuration again the way `reader` was made. Without it a reload is refused.
public func buildApplication(
    reader: ConfigReader,
    logger: Logger,
    apps: [AppConfiguration]? = nil,
    reload: ConfigurationReloader.ReadConfiguration? = nil
) async throws -> some ApplicationProtocol {
    let http = HTTPConfiguration(config: reader.scoped(to: "http"))
    let fileApps: [AppConfiguration]
    if let apps { fileApps = apps } else { fileApps = try await AppConfiguration.loadChecked(reader: reader) }
    let appsStore = try ManagedAppStoreSettings(config: reader.scoped(to: "apps_store"))

    let database = try await Database.open(reader: reader, logger: logger)
    do {
        if reader.bool(forKey: "database.migrate_on_start", default: true) {
            try await database.migrateWaiting(
                upTo: .seconds(max(0, reader.int(forKey: "database.start_wait_seconds", default: 60))),
                logger: logger
            )
        }
    } catch {
        try? await database.shutdown()
        throw error
    }
    // The file's apps and, with an `apps_store` key, those managed through the admin API.
    let fileAppsNow = FileApps(fileApps)
    let managedApps = appsStore.key.map { key in
        ManagedAppStore(client: database.client, key: key, previousKey: appsStore.previousKey, fileAppIDs: { fileAppsNow.ids })
    }
    let configuredApps: [AppConfiguration]
    let directory: AppDirectory
    do {
        let listing = try await managedApps?.records()
        ConfigurationReloader.report(listing?.unusable ?? [], logger: logger)
        configuredApps = ConfigurationReloader.merge(file: fileApps, managed: listing?.apps ?? [], logger: logger)
        directory = try await AppDirectory(apps: configuredApps)
    } catch {
        try? await database.shutdown()
        throw error
    }
    if configuredApps.isEmpty {
        logger.warning("no apps are configured; webhooks will be refused until the configuration file lists some under apps:")
    }

    let settings = WebhookSettings(config: reader.scoped(to: "webhooks"))
    let metrics = RelayMetrics()
    let delivery = DeliverySettings(config: reader.scoped(to: "delivery"), tls: reader.scoped(to: "tls"))
    let providers: ProviderSet
    let listener: PostgresListener
    let forwarder: ZendeskForwarder
    let eventForwarder: EventForwarder
    let eventTargets = configuredApps.compactMap { app in app.events.map { (id: app.id, events: $0) } }
    do {
        providers = try await ProviderSet(
            apps: configuredApps,
            settings: delivery,
            tokens: ProviderTokenStore(client: database.client, sealer: appsStore.providerTokenSealer)
        )
        // One connection in LISTEN for the dispatcher, the unread hub and the job runner.
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
            apps: configuredApps.compactMap { app in app.zendesk.map { (id: app.id, zendesk: $0) } },
            settings: ZendeskForwarderSettings(config: reader.scoped(to: "zendesk")),
            caFile: delivery.caFile,
            metrics: metrics,
            logger: logger
        )
        eventForwarder = try EventForwarder(
            client: database.client,
            apps: eventTargets,
            settings: EventForwarderSettings(config: reader.scoped(to: "events")),
            caFile: delivery.caFile,
            metrics: metrics,
            logger: logger
        )
    } catch {
        try? await database.shutdown()
        throw error
    }
    let outbox = DeliveryQueue(client: database.client)
    let dispatcher = Dispatcher(
        queue: outbox,
        providers: providers,
        settings: delivery,
        apps: delivery.enabled ? configuredApps.map(\.id) : [],
        wakeUps: listener.events(on: [DeliveryQueue.channel]),
        events: EventForwarder.wanted(by: eventTargets),
        metrics: metrics,
        logger: logger
    )
    let retention = RetentionService(
        client: database.client,
        settings: RetentionSettings(config: reader.scoped(to: "retention")),
        metrics: metrics,
        logger: logger
    )
    let writer = IntakeWriter(
        queue: outbox,
        logger: logger,
        maxBatch: settings.batchSize,
        maxConcurrentWrites: settings.concurrentWrites,
        dispatcher: delivery.enabled ? dispatcher : nil,
        paceWaiting: settings.paceWaitingDeliveries,
        paceMaxWait: settings.paceMaxWait,
        overlapAfter: settings.concurrentWriteAfter
    )
    let unread = UnreadSettings(config: reader.scoped(to: "unread"))
    let hub = UnreadHub(
        events: listener.events(on: [UnreadChannel.name]),
        heartbeat: unread.heartbeat,
        pollAfter: unread.pollAfter,
        maxStreams: unread.maxStreams,
        maxStreamsPerOwner: unread.maxStreamsPerOwner,
        maxStreamsPerApp: unread.maxStreamsPerApp,
        maxStreamsPerCredential: unread.maxStreamsPerCredential,
        streamLifetime: unread.streamLifetime,
        maxCacheBytes: unread.cacheBytes
    )
    let jobs = JobRunner(
        store: JobStore(client: database.client),
        wakeUps: listener.events(on: [JobStore.channel]),
        settings: JobSettings(config: reader.scoped(to: "jobs")),
        metrics: metrics,
        logger: logger
    )
    let consoleSettings = ConsoleSettings(config: reader.scoped(to: "console"))
    let keys = APIKeyStore(client: database.client)
    let sessions = ConsoleSessionStore(
        client: database.client,
        keys: keys,
        idleTimeout: consoleSettings.idleTimeout,
        maxLifetime: consoleSettings.sessionLifetime
    )
    let authenticator = Authenticator(keys: keys, apps: directory, sessions: consoleSettings.enabled ? sessions : nil)
    // What a reload compares its settings with: the ones in force now.
    let startSettings = AccessRecorder()
    if let reload { _ = try await reload(startSettings) }
    let reloader = ConfigurationReloader(
        read: reload,
        parts: .init(
            directory: directory,
            providers: providers,
            dispatcher: dispatcher,
            zendesk: forwarder,
            events: eventForwarder,
            authenticator: authenticator,
            webhooks: settings,
            deliveryEnabled: delivery.enabled
        ),
        fileApps: fileAppsNow,
        managed: managedApps,
        managedAtStart: configuredApps.filter { app in !fileApps.contains { $0.id == app.id } },
        startSettings: ConfigurationReloader.settings(of: startSettings),
        logger: logger
    )
    let console =
        consoleSettings.enabled
        ? try ConsoleController(
            keys: keys,
            sessions: sessions,
            settings: consoleSettings,
            trustedProxies: TrustedProxies(config: reader.scoped(to: "http"))
        ) : nil
    let (router, _) = buildRouter(
        database: database,
        apps: directory,
        authenticator: authenticator,
        writer: writer,
        settings: settings,
        hub: hub,
        metrics: metrics,
        console: console,
        maxUploadBytes: JobSettings(config: reader.scoped(to: "jobs")).maxUploadBytes,
        deviceSettings: DeviceSettings(config: reader.scoped(to: "devices")),
        reloader: reloader,
        reloadable: reload != nil,
        managedApps: managedApps,
        fileApps: { fileAppsNow.apps }
    )
    let limits = ConnectionLimits(config: reader.scoped(to: "http"))
    let serverName = "PushRelay"
    let shortcut = UnreadPollShortcut(
        hub: hub,
        authenticator: authenticator,
        metrics: metrics,
        apps: directory.ids,
        logger: logger,
        serverName: serverName
    )
    let webhooks = WebhookShortcut(apps: directory, writer: writer, settings: settings, metrics: metrics, logger: logger, serverName: serverName)
    var app = Application(
        router: router,
        server: limits.server(
            logger: logger,
            fastPaths: [webhooks.fastPath, shortcut.fastPath],
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
    // Start order; shutdown runs in reverse after the HTTP server: the writer drains, the
    // dispatcher finishes its sends, the listener stops, the pool closes, the embedded server stops.
    app.addServices(database.services)
    // Added before the dispatcher so it stops after it: its last write carries the outcomes of
    // the sends that finish during shutdown.
    app.addServices(ActivityWriter(client: database.client, tally: metrics.activity, logger: logger))
    app.addServices(listener)
    app.addServices(dispatcher)
    app.addServices(hub)
    app.addServices(jobs)
    app.addServices(forwarder)
    app.addServices(eventForwarder)
    app.addServices(retention)
    app.addServices(writer)
    app.addServices(ReloadOnHangUp(reloader: reloader, logger: logger))
    if let managedApps {
        app.addServices(ManagedAppWatcher(store: managedApps, reloader: reloader, changes: listener.events(on: [ManagedAppStore.channel])))
    }
    return app
}

/// The routes and middleware, and the list of served routes (checked against the OpenAPI document).
func buildRouter(
    database: Database,
    apps: AppDirectory,
    authenticator: Authenticator,
    writer: IntakeWriter,
    settings: WebhookSettings,
    hub: UnreadHub,
    metrics: RelayMetrics,
    console: ConsoleController? = nil,
    maxUploadBytes: Int = JobSettings.defaultMaxUploadBytes,
    deviceSettings: DeviceSettings = DeviceSettings(),
    reloader: ConfigurationReloader? = nil,
    reloadable: Bool = false,
    managedApps: ManagedAppStore? = nil,
    fileApps: (@Sendable () -> [AppConfiguration])? = nil
) -> (Router<AppRequestContext>, [Route]) {
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
    routes.addRoutes(HealthController(client: database.client, migrator: database.migrator).endpoints)
    routes.addRoutes(OpenAPIController().endpoints)
    routes.addRoutes(MetricsController(metrics: metrics).endpoints)
    routes.addRoutes(WebhookController(apps: apps, writer: writer, settings: settings, metrics: metrics).endpoints)
    routes.addRoutes(
        DeviceController(
            repository: PostgresDeviceRepository(client: database.client),
            authenticator: authenticator,
            settings: deviceSettings
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
        AppAdminController(store: managedApps, fileApps: fileApps ?? { apps.ids.compactMap(apps.app) }, authenticator: authenticator).endpoints
    )
    routes.addRoutes(StatusController(store: DeliveryStatusStore(client: database.client), authenticator: authenticator).endpoints)
    routes.addRoutes(
        UnreadController(store: UnreadStore(client: database.client), hub: hub, authenticator: authenticator, metrics: metrics).endpoints
    )
    routes.addRoutes(OperatorController(store: OperatorStore(client: database.client), apps: apps, authenticator: authenticator).endpoints)
    routes.addRoutes(ReloadController(reloader: reloader, reloadable: reloadable, authenticator: authenticator).endpoints)
    if let console {
        // HTML pages, outside the API's document; they call the API through this router.
        console.addRoutes(to: router)
        console.use(router.buildResponder())
    }
    return (router, routes.recorded.all)
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
                    if let plain = try? candidate.open(sealed, app: row(credential)) { return String(decoding: plain, as: UTF8.self) }
                }
                return nil
            }
        )
    }
}
