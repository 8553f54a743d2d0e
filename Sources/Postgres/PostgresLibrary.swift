import CLibPQ

/// Facts about the libpq this build runs on.
public enum PostgresLibrary {
    /// libpq's version as a dotted string (for example `15.18`).
    public static var version: String {
        let number = Int(PQlibVersion())
        return number >= 100_000 ? "\(number / 10_000).\(number % 10_000)" : "\(number / 10_000).\(number / 100 % 100).\(number % 100)"
    }
}
