/// A configuration problem found at start-up; the message names the app and the key.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
