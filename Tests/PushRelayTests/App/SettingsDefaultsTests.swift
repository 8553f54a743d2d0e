import Configuration
import Testing

@testable import PushRelay

/// Each settings type holds its defaults, and its `+ConfigReader.swift` reading keeps them for a
/// key that is not set: a reader with no values gives exactly what the type's own initialiser
/// gives, field by field, so tests and code that build settings without a reader see what a relay
/// with no configuration runs with.
@Suite("Settings defaults")
struct SettingsDefaultsTests {
    static let empty = ConfigReader(provider: InMemoryProvider(values: [:]))

    /// Every stored field, nested ones included, as text.
    static func fields(_ value: some Any) -> String {
        var text = ""
        dump(value, to: &text)
        return text
    }

    @Test("a reader with no values gives each settings type's own defaults")
    func emptyReaderGivesTypeDefaults() throws {
        let reader = Self.empty
        #expect(Self.fields(HTTPSettings(config: reader)) == Self.fields(HTTPSettings()))
        #expect(Self.fields(ConnectionLimits(config: reader)) == Self.fields(ConnectionLimits()))
        #expect(Self.fields(DatabaseSettings(config: reader)) == Self.fields(DatabaseSettings()))
        #expect(Self.fields(DeliverySettings(config: reader)) == Self.fields(DeliverySettings()))
        #expect(Self.fields(ZendeskForwarderSettings(config: reader)) == Self.fields(ZendeskForwarderSettings()))
        #expect(Self.fields(EventForwarderSettings(config: reader)) == Self.fields(EventForwarderSettings()))
        #expect(Self.fields(JobSettings(config: reader)) == Self.fields(JobSettings()))
        #expect(Self.fields(UnreadSettings(config: reader)) == Self.fields(UnreadSettings()))
        #expect(Self.fields(DeviceSettings(config: reader)) == Self.fields(DeviceSettings()))
        #expect(Self.fields(RetentionSettings(config: reader)) == Self.fields(RetentionSettings()))
        #expect(Self.fields(ConsoleSettings(config: reader)) == Self.fields(ConsoleSettings()))
        #expect(Self.fields(AuthSettings(config: reader)) == Self.fields(AuthSettings()))
        #expect(Self.fields(try ManagedAppStoreSettings(config: reader)) == Self.fields(ManagedAppStoreSettings()))
        #expect(Self.fields(try TrustedProxies(config: reader)) == Self.fields(TrustedProxies.none))
        let webhooks = WebhookSettings(config: reader)
        let defaults = WebhookSettings()
        #expect(webhooks.maxDevices == defaults.maxDevices)
        #expect(webhooks.signatureTolerance == defaults.signatureTolerance)
        #expect(webhooks.batchSize == defaults.batchSize)
        #expect(webhooks.concurrentWrites == defaults.concurrentWrites)
        #expect(webhooks.concurrentWriteAfter == defaults.concurrentWriteAfter)
        #expect(webhooks.paceWaitingDeliveries == defaults.paceWaitingDeliveries)
        #expect(webhooks.paceMaxWait == defaults.paceMaxWait)
        #expect(webhooks.limits.maxDevices == defaults.maxDevices)
    }

    @Test("a shared default follows the value it is a share of, read or given")
    func derivedDefaults() {
        let values: [AbsoluteConfigKey: ConfigValue] = [
            "max_streams": .init(.int(400), isSecret: false),
            "max_connections": .init(.int(800), isSecret: false),
        ]
        let reader = ConfigReader(provider: InMemoryProvider(values: values))
        let unread = UnreadSettings(config: reader)
        #expect(unread.maxStreamsPerApp == 300)
        #expect(unread.maxStreamsPerCredential == 100)
        #expect(UnreadSettings(maxStreams: 400).maxStreamsPerApp == 300)
        #expect(ConnectionLimits(config: reader).intakeReserved == 100)
        #expect(ConnectionLimits(maxConnections: 800).intakeReserved == 100)
    }

    @Test("a key that is set wins over the type's default, within its bounds")
    func setKeysWin() {
        let values: [AbsoluteConfigKey: ConfigValue] = [
            "lease_seconds": .init(.int(45), isSecret: false),
            "poll_interval_ms": .init(.int(1), isSecret: false),
            "batch_size": .init(.int(7), isSecret: false),
        ]
        let reader = ConfigReader(provider: InMemoryProvider(values: values))
        let jobs = JobSettings(config: reader)
        #expect(jobs.lease == .seconds(45))
        #expect(jobs.pollInterval == .milliseconds(10))
        #expect(jobs.batchSize == 7)
        #expect(jobs.parallelBatches == JobSettings().parallelBatches)
        let delivery = DeliverySettings(config: reader)
        #expect(delivery.lease == .seconds(45))
        #expect(delivery.batchSize == 7)
        #expect(delivery.requestTimeout == DeliverySettings().requestTimeout)
    }
}
