import ArgumentParser
import PushRelay

/// `push-relay version`.
struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the version of PushRelay and of libpq and libcurl.")

    func run() {
        for line in PushRelayVersion.report { print(line) }
    }
}
