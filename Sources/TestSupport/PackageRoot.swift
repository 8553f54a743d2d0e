import Foundation

/// The package's root directory (the one holding `Package.swift`), found upward from a test file's
/// `#filePath`, so tests can read the repository's files wherever their own file sits.
public func packageRoot(from filePath: String) -> URL {
    var directory = URL(fileURLWithPath: filePath).deletingLastPathComponent()
    while directory.path != "/" {
        if FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path) { return directory }
        directory.deleteLastPathComponent()
    }
    fatalError("no Package.swift above \(filePath)")
}
