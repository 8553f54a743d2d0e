/// Waits until `condition` holds, checking every 20 ms; false once `ceiling` has passed.
///
/// The one way a test waits for something to happen. The ceiling only bounds a hang (a condition
/// that never comes true): it is far above what any step takes on a loaded machine, so a slow run
/// is never a failure; a test that needs to know *when* something happened checks the mechanism
/// (the deadline a part computed, the clock it was given) instead of timing it here.
public func eventually(ceiling: Duration = hangCeiling, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + max(ceiling, hangCeiling)
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

/// How long ``eventually(ceiling:_:)`` (and every other wait of a test: a child's exit, an HTTP
/// answer, a free database connection) lasts before it calls the work hung: ten minutes, for work
/// that takes under a second on an idle machine. A run with every core oversubscribed (load
/// average 15 on 2 cores) was seen to take over 60 s for such work; a batch that really hangs is
/// still ended by its timeout in `scripts/test/reap.py`.
public let hangCeiling: Duration = .seconds(600)
/// The value of the Prometheus sample named `name` whose labels include all of `labels`.
public func metricValue(_ text: String, _ name: String, _ labels: [String: String]) -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
        guard labels.allSatisfy({ line.contains("\($0.key)=\"\($0.value)\"") }) else { continue }
        return line.split(separator: " ").last.flatMap { Double($0) }
    }
    return nil
}
