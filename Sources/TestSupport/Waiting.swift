/// Waits until `condition` holds, checking every 20 ms; false after `timeout`.
public func eventually(timeout: Duration = .seconds(20), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

/// The value of the Prometheus sample named `name` whose labels include all of `labels`.
public func metricValue(_ text: String, _ name: String, _ labels: [String: String]) -> Double? {
    for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
        guard labels.allSatisfy({ line.contains("\($0.key)=\"\($0.value)\"") }) else { continue }
        return line.split(separator: " ").last.flatMap { Double($0) }
    }
    return nil
}
