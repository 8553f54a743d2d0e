import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A file the configuration names (a key, a service account, a secret, the configuration itself),
/// read at start or reload, with the reason when it cannot be: a missing file and a file the
/// relay's user may not read need different fixes, so the message says which.
enum ConfiguredFile {
    /// The file's bytes, or a ``ConfigurationError`` that reads
    /// `<what> <path>: <reason>` (`app 'support': cannot read apns.token.key_file /etc/…p8: no such file`).
    static func read(_ path: String, what: String) throws -> Data {
        if let data = FileManager.default.contents(atPath: path) { return data }
        throw ConfigurationError("\(what) \(path): \(reason(path))")
    }

    /// Whether the file can be opened for reading; otherwise the same error as ``read(_:what:)``.
    static func checkReadable(_ path: String, what: String) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        if descriptor >= 0 {
            close(descriptor)
            return
        }
        throw ConfigurationError("\(what) \(path): \(reason(path))")
    }

    /// Why `path` cannot be read, in words: `no such file`, `permission denied (owner root:root,
    /// mode 0600; push-relay runs as push-relay)`, `is a directory`, or the system's message.
    static func reason(_ path: String) -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        let error = errno
        if descriptor >= 0 {
            close(descriptor)
            var directory: ObjCBool = false
            return FileManager.default.fileExists(atPath: path, isDirectory: &directory) && directory.boolValue
                ? "is a directory" : "unreadable"
        }
        switch error {
        case ENOENT: return "no such file"
        case ENOTDIR: return "a part of the path is not a directory"
        case EACCES:
            let user = NSUserName()
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else {
                return "permission denied (a directory on the path is closed to \(user))"
            }
            let owner = attributes[.ownerAccountName] as? String ?? "?"
            let group = attributes[.groupOwnerAccountName] as? String ?? "?"
            let mode = (attributes[.posixPermissions] as? NSNumber).map { "0" + String($0.intValue, radix: 8) } ?? "?"
            return "permission denied (owner \(owner):\(group), mode \(mode); push-relay runs as \(user))"
        default:
            return String(cString: strerror(error))
        }
    }
}
