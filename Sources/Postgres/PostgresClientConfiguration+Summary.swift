import CLibPQ

extension PostgresClientConfiguration {
    /// Where a connection string leads, for a log line: its `host`, `hostaddr`, `port`, `dbname`
    /// and `user` as libpq reads them (`host=db1,db2 port=5432 dbname=relay user=relay`), never
    /// its password or other options. Keys it does not set are left out (libpq then uses its
    /// defaults and the `PG*` environment variables).
    public static func summary(of conninfo: String) -> String {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &error) else {
            if let error { PQfreemem(error) }
            // libpq's message may quote the string, and with it a password.
            return "(a connection string libpq cannot read)"
        }
        defer { PQconninfoFree(options) }
        var values: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { values[String(cString: keyword)] = String(cString: value) }
            option += 1
        }
        let parts = ["host", "hostaddr", "port", "dbname", "user"].compactMap { key in values[key].map { "\(key)=\($0)" } }
        return parts.isEmpty ? "(libpq's defaults)" : parts.joined(separator: " ")
    }
}
