import ArgumentParser
import PushRelay

/// The `push-relay` executable: a thin shell over the PushRelay library.
@main
struct PushRelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-relay",
        abstract: "A self-hosted push-notification relay: Zendesk webhooks in, APNs and FCM pushes out.",
        discussion: """
            With no database.url configured, PushRelay runs an embedded PostgreSQL cluster in its data directory, so `push-relay serve` works on a \
            fresh machine with no other set-up.

            Configuration comes from command-line options, then environment variables (HTTP_PORT for http.port, DATABASE_URL for database.url, \
            ...), then the YAML file given by --config or CONFIG_FILE. docs/configuration.md lists every key; an unknown key is an error, and \
            `push-relay config check` validates a file without serving.
            """,
        version: PushRelayVersion.full,
        subcommands: [
            Serve.self, Migrate.self, Config.self, Reload.self, Keys.self, Devices.self, Jobs.self, Sandbox.self, Health.self, Version.self,
        ],
        defaultSubcommand: nil
    )
}
