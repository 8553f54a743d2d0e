import ArgumentParser
import PushRelay

/// `push-relay version`.
struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the version of PushRelay, of libpq and libcurl, and the memory allocator in use."
    )

    func run() {
        for line in PushRelayVersion.report { print(line) }
        print("allocator: \(Allocator.description)")
    }
}
