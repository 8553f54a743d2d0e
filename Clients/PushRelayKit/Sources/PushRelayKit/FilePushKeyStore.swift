import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Push keys in a JSON file readable by its owner only (mode 0600), replaced atomically on each
/// save. On Linux; and on Apple platforms in an app group's container, where the app and its
/// Notification Service Extension both reach it:
///
/// ```swift
/// let folder = FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: "group.com.example.support")!
/// let keys = FilePushKeyStore(url: folder.appending(path: "push-keys.json"))
/// ```
///
/// Each call reads the file, so a key the app saves is what the extension reads next.
public struct FilePushKeyStore: PushKeyStore {
    /// The file; its folder is created at the first save.
    public let url: URL

    public init(url: URL) { self.url = url }

    public func currentKey() throws -> PushKey? { try load().first }

    public func key(id: String) throws -> PushKey? { try load().first { $0.id == id } }

    public func save(_ key: PushKey) throws { try replaceFile(with: PushKeyRing.encode(PushKeyRing.saving(key, to: load()))) }

    /// The keys, newest first; none when the file does not exist.
    private func load() throws -> [PushKey] {
        guard FileManager.default.fileExists(atPath: url.path) else { return [] }
        return try PushKeyRing.decode(Data(contentsOf: url))
    }

    /// Writes a temporary file created with mode 0600 beside the file, then renames it over the file.
    private func replaceFile(with data: Data) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        let temporary = url.path + ".\(UUID().uuidString).tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else { throw Self.error("cannot create \(temporary)") }
        var written = 0
        while written < data.count {
            let count = data[(data.startIndex + written)...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            written += count
        }
        let closed = close(descriptor) == 0
        guard written == data.count, closed, rename(temporary, url.path) == 0 else {
            let error = Self.error("cannot write \(url.path)")
            unlink(temporary)
            throw error
        }
    }

    private static func error(_ what: String) -> PushKeyStoreError {
        PushKeyStoreError("\(what): \(String(cString: strerror(errno)))")
    }
}
