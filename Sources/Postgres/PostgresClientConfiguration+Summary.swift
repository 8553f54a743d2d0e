import CLibPQ

/// A connection string's words never reach a log line or an error message: libpq's own messages
/// about a string it cannot read quote the string (`invalid percent-encoded token: "…"`,
/// `unexpected character … in URI: "…"`), and a password holding `@` makes part of it the host
/// (`could not translate host name "…@…"`). The relay reads the string first, refuses what
/// libpq would quote with its own words, and names the server by host, port, database and user.
extension PostgresClientConfiguration {
    /// The parts of a connection string a summary may show, as libpq reads them.
    private static let shownKeys = ["host", "hostaddr", "port", "dbname", "user"]

    /// Where a connection string leads, for a log line: its `host`, `hostaddr`, `port`, `dbname`
    /// and `user` as libpq reads them (`host=db1,db2 port=5432 dbname=relay user=relay`), never
    /// its password or other options. Keys it does not set are left out (libpq then uses its
    /// defaults and the `PG*` environment variables). A string ``check(_:)`` refuses is not shown.
    public static func summary(of conninfo: String) -> String {
        guard let values = try? parse(conninfo) else { return "(a connection string libpq cannot read)" }
        let parts = shownKeys.compactMap { key in values[key].map { "\(key)=\($0)" } }
        return parts.isEmpty ? "(libpq's defaults)" : parts.joined(separator: " ")
    }

    /// Throws ``PostgresError/Code/connectionSettings`` with the relay's own message, which quotes
    /// nothing of the string, when libpq cannot read `conninfo` or reads a host name holding `@`
    /// (a user or password with an `@` that is not written `%40`).
    public static func check(_ conninfo: String) throws {
        _ = try parse(conninfo)
    }

    private static func parse(_ conninfo: String) throws -> [String: String] {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &error) else {
            // libpq's message may quote the string, and with it a password: never passed on.
            if let error { PQfreemem(error) }
            throw PostgresError(
                code: .connectionSettings,
                message: "the connection string cannot be read (neither a postgresql:// URL nor key=value pairs libpq accepts); "
                    + "in a URL, write @ as %40, % as %25, / as %2F and : as %3A in the user name and password"
            )
        }
        defer { PQconninfoFree(options) }
        var values: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { values[String(cString: keyword)] = String(cString: value) }
            option += 1
        }
        if values["host"]?.contains("@") == true || values["hostaddr"]?.contains("@") == true {
            throw PostgresError(
                code: .connectionSettings,
                message: "the connection string's host holds @: in a URL, a user name or password with @ writes it as %40 "
                    + "(and % as %25, / as %2F, : as %3A)"
            )
        }
        return values
    }
}
