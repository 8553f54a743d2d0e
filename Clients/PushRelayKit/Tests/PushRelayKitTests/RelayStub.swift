import Foundation

@testable import PushRelayKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A relay played by a script: each test takes a host of its own, says how that host answers, and
/// reads back the requests it got, in order. Every request of the client's session goes through
/// here (a `URLProtocol`), so nothing leaves the process.
final class RelayStub: URLProtocol {
    /// A request as the relay saw it.
    struct Seen: Sendable, Equatable {
        var method: String
        /// The path after `/v1/apps/<app>/`, e.g. `devices/token-1`.
        var path: String
        var authorization: String?
        var ifNoneMatch: String?
        /// The JSON body's fields, as text; empty without a body.
        var body: [String: String]
    }

    /// An answer: a status with headers and a body, or a failure before any answer.
    enum Reply: Sendable {
        case answer(Int, headers: [String: String], body: String)
        case failure(URLError.Code)

        static func json(_ status: Int, _ body: String, headers: [String: String] = [:]) -> Reply {
            .answer(status, headers: headers.merging(["Content-Type": "application/json"]) { $1 }, body: body)
        }

        static func error(_ status: Int, code: String, message: String) -> Reply {
            .json(status, #"{"error":{"code":"\#(code)","message":"\#(message)"}}"#)
        }
    }

    typealias Script = @Sendable (Seen) -> Reply

    private static let scripts = Locked<[String: Script]>([:])
    private static let seen = Locked<[String: [Seen]]>([:])

    /// A new host answering with `script`.
    static func host(_ name: String, _ script: @escaping Script) -> String {
        let host = "\(name)-\(UUID().uuidString.lowercased()).test"
        scripts.withLock { $0[host] = script }
        return host
    }

    /// The requests `host` got, oldest first; `method` keeps only those.
    static func requests(_ host: String, _ method: String? = nil) -> [Seen] {
        seen.withLock { $0[host] ?? [] }.filter { method == nil || $0.method == method }
    }

    static func session() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [RelayStub.self]
        return URLSession(configuration: configuration)
    }

    /// A client of app `support` whose requests reach `host`.
    static func client(_ host: String, _ configure: (inout PushRelayClient.Configuration) -> Void = { _ in }) -> PushRelayClient {
        var configuration = PushRelayClient.Configuration(baseURL: URL(string: "http://\(host)")!, appID: "support")
        configure(&configuration)
        return PushRelayClient(configuration: configuration, session: session())
    }

    override class func canInit(with request: URLRequest) -> Bool { true }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        let url = request.url!
        let host = url.host ?? ""
        let prefix = "/v1/apps/support/"
        let path = url.path.hasPrefix(prefix) ? String(url.path.dropFirst(prefix.count)) : url.path
        let data = request.httpBody ?? request.httpBodyStream.map(Self.read) ?? Data()
        let fields = (try? JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
        let seen = Seen(
            method: request.httpMethod ?? "GET",
            path: path,
            authorization: request.value(forHTTPHeaderField: "Authorization"),
            ifNoneMatch: request.value(forHTTPHeaderField: "If-None-Match"),
            body: fields.mapValues { "\($0)" }
        )
        Self.seen.withLock { $0[host, default: []].append(seen) }
        let script = Self.scripts.withLock { $0[host] }
        switch script?(seen) ?? .error(404, code: "not_found", message: "no script for \(host)") {
        case .answer(let status, let headers, let body):
            let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client?.urlProtocol(self, didLoad: Data(body.utf8))
            client?.urlProtocolDidFinishLoading(self)
        case .failure(let code):
            client?.urlProtocol(self, didFailWithError: URLError(code))
        }
    }

    override func stopLoading() {}

    /// A request body URLSession handed over as a stream.
    static func read(_ stream: InputStream) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        stream.open()
        defer { stream.close() }
        while case let count = stream.read(&buffer, maxLength: buffer.count), count > 0 { data.append(buffer, count: count) }
        return data
    }
}

/// Counts a token provider's calls and hands out `<prefix>-1`, `<prefix>-2`, …
final class TokenMint: Sendable {
    let prefix: String
    private let calls = Locked(0)

    init(_ prefix: String) { self.prefix = prefix }

    var count: Int { calls.withLock { $0 } }

    var provider: UserTokenProvider {
        { [self] _ in
            let number = calls.withLock { count in
                count += 1
                return count
            }
            return "\(prefix)-\(number)"
        }
    }
}
