import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

// A signed-in console visit and the API calls it makes as its session: every page reads its data,
// and every action writes it, through the relay's own HTTP API (``ConsoleController``).

/// A signed-in visit: the session, and the API as this session.
struct ConsoleVisit: Sendable {
    /// An `application/x-www-form-urlencoded` body (at most 64 KiB).
    static func form(_ request: Request) async throws -> [String: String] {
        let type = (request.headers[.contentType] ?? "").lowercased()
        guard type.hasPrefix("application/x-www-form-urlencoded") else { return [:] }
        let buffer = try await request.body.collect(upTo: 64 * 1024)
        var fields: [String: String] = [:]
        for pair in String(buffer: buffer).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (text: Substring) in
                String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            fields[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }

    let token: String
    let session: ConsoleSessionStore.Session
    let form: [String: String]
    let responder: RouterResponder<AppRequestContext>
    let context: AppRequestContext

    /// A page with the layout's values filled in: the navigation, who is signed in, the CSRF token.
    func page<View>(title: String, page: String, view: View) -> ConsoleView.ConsolePage<View> {
        let who: String
        switch session.principal {
        case .admin: who = "admin key \(session.keyPrefix)"
        case .app(let id, _): who = "app key \(session.keyPrefix) (\(id))"
        case .user: who = ""
        }
        let nav = [
            ("overview", "Overview", "/console"), ("find", "Find", "/console/find"),
            ("devices", "Devices", "/console/devices"),
            ("jobs", "Jobs", "/console/jobs"), ("apps", "Apps", "/console/apps"),
        ]
        return ConsoleView.ConsolePage(
            title: title,
            page: page,
            signedIn: true,
            who: who,
            csrf: session.csrfToken,
            nav: nav.map { ConsoleView.NavLink(href: $0.2, label: $0.1, current: $0.0 == page) },
            view: view
        )
    }

    /// The app ids this session may look at (`GET /v1/apps`).
    func appIDs() async throws -> [String] {
        try await api(.get, "/v1/apps").value(ConsoleAPIList<ConsoleController.Operator.AppView>.self)?.items.map(\.id)
            ?? []
    }

    /// Sends an API request through the router as this session.
    func api(_ method: HTTPRequest.Method, _ path: String, body: ByteBuffer? = nil) async throws -> ConsoleAPIAnswer {
        var fields = HTTPFields()
        // The __Host- name, which counts whether the visitor came over TLS or not.
        fields[.cookie] = "\(ConsoleSessionStore.secureCookieName)=\(token)"
        if method != .get { fields[Authenticator.csrfHeader] = session.csrfToken }
        if body != nil { fields[.contentType] = "application/json" }
        let head = HTTPRequest(
            method: method,
            scheme: "http",
            authority: "console",
            path: path,
            headerFields: fields
        )
        let request = Request(head: head, body: RequestBody(buffer: body ?? ByteBuffer()))
        let inner = AppRequestContext(
            source: ApplicationRequestContextSource(channel: context.channel, logger: context.logger)
        )
        let response = try await responder.respond(to: request, context: inner)
        let collector = ConsoleBodyCollector()
        try await response.body.write(collector)
        return ConsoleAPIAnswer(status: response.status, bytes: collector.bytes)
    }
}

/// An answer of the API, read through the API's own types.
struct ConsoleAPIAnswer: Sendable {
    var status: HTTPResponse.Status
    var bytes: [UInt8]

    var ok: Bool { (200..<300).contains(status.code) }

    /// The answer as the API's `type`, when it succeeded; `nil` otherwise (``errorMessage`` says why).
    func value<Value: Decodable>(_ type: Value.Type) -> Value? {
        guard ok else { return nil }
        return try? Self.decoder.decode(type, from: Data(bytes))
    }

    /// The API's error message (`{"error":{"message":…}}`), or the status.
    var errorMessage: String {
        if let body = try? Self.decoder.decode(ErrorBody.self, from: Data(bytes)) { return body.error.message }
        return ok ? "the API's answer (HTTP \(status.code)) could not be read" : "HTTP \(status.code)"
    }

    /// Reads what ``AppRequestContext/responseEncoder`` writes.
    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}

/// A list answer of the API: `{"<name>":[…]}`, and `"next"` (the next page's cursor, or `null`)
/// on a paged one (``StatusController/Page``, the device, job and app lists).
struct ConsoleAPIList<Item: Decodable>: Decodable {
    var items: [Item]
    var next: String?

    private typealias Key = NamedCodingKey

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        let names = container.allKeys.filter { $0.stringValue != "next" }
        guard names.count == 1, let name = names.first else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "a list answer has one list")
            )
        }
        items = try container.decode([Item].self, forKey: name)
        next = try container.decodeIfPresent(String.self, forKey: Key(stringValue: "next"))
    }
}

/// Collects a response body (the API's answers are small JSON documents).
private final class ConsoleBodyCollector: ResponseBodyWriter, @unchecked Sendable {
    var bytes: [UInt8] = []
    func write(_ buffer: ByteBuffer) async throws { bytes += buffer.readableBytesView }
    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
