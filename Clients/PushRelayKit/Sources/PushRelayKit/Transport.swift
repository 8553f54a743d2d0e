import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Supplies a user JWT for the relay (HS256 with the app's `user_tokens` key, `sub` = the user,
/// `exp` set). Your backend signs it; the app asks for it here. It is called when a user is
/// authorized, and again whenever the relay refuses the last token (401: expired or revoked).
public typealias UserTokenProvider = @Sendable (_ userID: String) async throws -> String

/// A value behind a lock, for the few things shared with URLSession's delegate queue and the main
/// actor.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// An authorized user: its id, the app's token provider, and the last token it gave.
final class UserSession: Sendable {
    let userID: String
    let provider: UserTokenProvider
    /// The token in use, and the provider call under way; one lock for both, so a caller never
    /// starts a second call while one is finishing.
    private let state = Locked<(token: String?, pending: Task<String, any Error>?)>((nil, nil))

    init(userID: String, provider: @escaping UserTokenProvider) {
        self.userID = userID
        self.provider = provider
    }

    /// The cached token, or a new one from the provider (concurrent callers share one call).
    func token() async throws(PushRelayError) -> String {
        let userID = self.userID
        let provider = self.provider
        enum Next {
            case cached(String)
            case wait(Task<String, any Error>)
        }
        let next: Next = state.withLock { state in
            if let token = state.token { return .cached(token) }
            if let pending = state.pending { return .wait(pending) }
            let task = Task { try await provider(userID) }
            state.pending = task
            return .wait(task)
        }
        let task: Task<String, any Error>
        switch next {
        case .cached(let token): return token
        case .wait(let pending): task = pending
        }
        do {
            let token = try await task.value
            state.withLock { state in
                if state.pending == task {
                    state.token = token
                    state.pending = nil
                }
            }
            return token
        } catch {
            state.withLock { if $0.pending == task { $0.pending = nil } }
            throw .tokenProvider(String(describing: error))
        }
    }

    /// Forgets `token` after the relay refused it, so the next request asks the provider.
    func refused(_ token: String) {
        state.withLock { if $0.token == token { $0.token = nil } }
    }

    /// What one try with a token came to: an answer, or the relay's 401 and its body.
    enum Attempt<Answer> {
        case answered(Answer)
        case refused(Data)
    }

    /// Runs `attempt` with the user's token. When the relay refuses the token (401), it is
    /// forgotten and `attempt` runs once more with a fresh one from the provider; a second 401
    /// throws ``PushRelayError/unauthorized(_:)``.
    func withToken<Answer>(
        isolation: isolated (any Actor)? = #isolation,
        _ attempt: (String) async throws(PushRelayError) -> Attempt<Answer>
    ) async throws(PushRelayError) -> Answer {
        var refreshed = false
        while true {
            let token = try await token()
            switch try await attempt(token) {
            case .answered(let answer):
                return answer
            case .refused(let body):
                refused(token)
                if refreshed { throw .unauthorized(Transport.errorMessage(body) ?? "401") }
                refreshed = true
            }
        }
    }
}

/// How requests reach the relay: its base URL, the app, and a URLSession that never caches (the
/// counter does its own conditional requests).
struct Transport: Sendable {
    let baseURL: URL
    let appID: String
    let session: URLSession
    let timeout: TimeInterval

    static func makeSession() -> URLSession { URLSession(configuration: sessionConfiguration()) }

    /// Ephemeral, without a cache or cookies.
    static func sessionConfiguration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpShouldSetCookies = false
        return configuration
    }

    /// RFC 3986 unreserved characters: everything else in a path segment is percent-encoded.
    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// `<base>/v1/apps/<app>/<segments…>`, each segment percent-encoded.
    func url(_ segments: [String]) -> URL {
        var text = baseURL.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        for segment in ["v1", "apps", appID] + segments {
            text += "/" + (segment.addingPercentEncoding(withAllowedCharacters: Self.unreserved) ?? segment)
        }
        return URL(string: text)!
    }

    func request(
        _ method: String,
        _ segments: [String],
        body: Data? = nil,
        headers: [String: String] = [:],
        timeout: TimeInterval? = nil
    )
        -> URLRequest
    {
        var request = URLRequest(url: url(segments), cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout ?? self.timeout)
        request.httpMethod = method
        request.httpBody = body
        if body != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    /// Sends `request` with the user's token; on 401 once more with a fresh token from the
    /// provider. Any answer but a second 401 is returned, whatever its status.
    func send(_ request: URLRequest, as user: UserSession) async throws(PushRelayError) -> (Data, HTTPURLResponse) {
        try await user.withToken { token throws(PushRelayError) in
            var request = request
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            let (data, http) = try await perform(request)
            return http.statusCode == 401 ? .refused(data) : .answered((data, http))
        }
    }

    /// One request. When the calling task is cancelled, the call returns at once with
    /// ``PushRelayError/network(_:)`` and the request is left to finish (or time out) unheard.
    ///
    /// Neither `URLSession.data(for:)` nor `URLSessionTask.cancel()`: with swift-corelibs-foundation
    /// (Linux), cancelling `data(for:)` while its answer completes deadlocks the two threads, and
    /// `cancel()` racing the completion crashes ("Trying to access a behaviour for a task that in not
    /// in the registry"). Both were seen in this project's tests.
    func perform(_ request: URLRequest) async throws(PushRelayError) -> (Data, HTTPURLResponse) {
        let waiting = Locked<CheckedContinuation<Result<(Data, HTTPURLResponse), PushRelayError>, Never>?>(nil)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiting.withLock { $0 = continuation }
                let task = session.dataTask(with: request) { data, response, error in
                    let result: Result<(Data, HTTPURLResponse), PushRelayError>
                    if let error {
                        result = .failure(.network(Self.describe(error)))
                    } else if let http = response as? HTTPURLResponse {
                        result = .success((data ?? Data(), http))
                    } else {
                        result = .failure(.invalidResponse("not an HTTP response"))
                    }
                    waiting.withLock { $0.take() }?.resume(returning: result)
                }
                task.resume()
                if Task.isCancelled { waiting.withLock { $0.take() }?.resume(returning: .failure(.network("cancelled"))) }
            }
        } onCancel: {
            waiting.withLock { $0.take() }?.resume(returning: .failure(.network("cancelled")))
        }
        return try result.get()
    }

    /// Sends and requires a 2xx answer.
    func sendExpectingSuccess(_ request: URLRequest, as user: UserSession) async throws(PushRelayError) -> (Data, HTTPURLResponse) {
        let (data, response) = try await send(request, as: user)
        guard (200..<300).contains(response.statusCode) else { throw Self.serverError(response, data) }
        return (data, response)
    }

    /// The relay's error body: `{"error":{"code","message"}}`.
    private struct ErrorEnvelope: Decodable {
        struct Detail: Decodable {
            var code: String
            var message: String
        }
        var error: Detail
    }

    static func serverError(_ response: HTTPURLResponse, _ data: Data) -> PushRelayError {
        if let envelope = try? JSONDecoder().decode(ErrorEnvelope.self, from: data) {
            return .server(status: response.statusCode, code: envelope.error.code, message: envelope.error.message)
        }
        return .server(
            status: response.statusCode,
            code: "http_\(response.statusCode)",
            message: HTTPURLResponse.localizedString(forStatusCode: response.statusCode)
        )
    }

    static func errorMessage(_ data: Data) -> String? {
        (try? JSONDecoder().decode(ErrorEnvelope.self, from: data))?.error.message
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? URLError {
            return "\(error.code.rawValue) \(error.localizedDescription)"
        }
        return String(describing: error)
    }
}

/// One Server-Sent Events request, read as it arrives through URLSession's data delegate (which
/// works on every platform Foundation runs on).
final class EventStreamConnection: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    enum Chunk: Sendable {
        case response(HTTPURLResponse)
        case data(Data)
    }

    let chunks: AsyncThrowingStream<Chunk, any Error>
    private let continuation: AsyncThrowingStream<Chunk, any Error>.Continuation
    private let session = Locked<URLSession?>(nil)
    private let task = Locked<URLSessionDataTask?>(nil)
    /// Set on the session's delegate queue when the task completed.
    private let completed = Locked(false)

    override init() {
        (chunks, continuation) = AsyncThrowingStream.makeStream(of: Chunk.self)
        super.init()
    }

    /// Starts `request`; ``cancel()`` (or the end of the chunks' iteration) stops it.
    func start(_ request: URLRequest) {
        let configuration = Transport.sessionConfiguration()
        configuration.timeoutIntervalForRequest = request.timeoutInterval
        configuration.timeoutIntervalForResource = 7 * 24 * 3600
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let session = URLSession(configuration: configuration, delegate: self, delegateQueue: queue)
        self.session.withLock { $0 = session }
        continuation.onTermination = { [weak self] _ in self?.cancel() }
        let task = session.dataTask(with: request)
        self.task.withLock { $0 = task }
        task.resume()
    }

    /// Ends the request. The task is cancelled on the session's delegate queue, and only if it has
    /// not completed: that queue delivers the completion, so the two cannot cross. (On Linux,
    /// cancelling a task whose completion is under way crashes, and waiting for the session's
    /// queue from a task's cancellation handler deadlocks.)
    func cancel() {
        continuation.finish()
        guard let session = session.withLock({ $0.take() }) else { return }
        let completed = self.completed
        let task = self.task.withLock { $0.take() }
        session.delegateQueue.addOperation {
            if !completed.withLock({ $0 }) { task?.cancel() }
            // Releases the session's strong reference to this delegate once the task has ended.
            session.finishTasksAndInvalidate()
        }
    }

    func urlSession(
        _ session: URLSession,
        dataTask: URLSessionDataTask,
        didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        if let http = response as? HTTPURLResponse { continuation.yield(.response(http)) }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        continuation.yield(.data(data))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        completed.withLock { $0 = true }
        if let error { continuation.finish(throwing: error) } else { continuation.finish() }
        session.finishTasksAndInvalidate()
    }
}

/// Splits Server-Sent Events text into events (RFC: blocks separated by a blank line; `event:`
/// and `data:` fields; lines starting with `:` are comments).
struct EventStreamParser {
    struct Event: Equatable {
        var name: String
        var data: String
    }

    private var buffer = Data()

    /// Adds bytes and returns the events they complete.
    mutating func feed(_ data: Data) -> [Event] {
        buffer.append(data)
        var events: [Event] = []
        while let end = Self.blockEnd(in: buffer) {
            let block = String(decoding: buffer[buffer.startIndex..<end.start], as: UTF8.self)
            buffer.removeSubrange(buffer.startIndex..<end.end)
            var name = "message"
            var lines: [String] = []
            var hasData = false
            for line in block.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
                if line.hasPrefix(":") { continue }
                let (field, value) = Self.field(line)
                switch field {
                case "event": name = value
                case "data":
                    lines.append(value)
                    hasData = true
                default: break
                }
            }
            if hasData { events.append(Event(name: name, data: lines.joined(separator: "\n"))) }
        }
        return events
    }

    private static func field(_ line: Substring) -> (String, String) {
        guard let colon = line.firstIndex(of: ":") else { return (String(line), "") }
        var value = line[line.index(after: colon)...]
        if value.hasPrefix(" ") { value = value.dropFirst() }
        return (String(line[..<colon]), String(value))
    }

    /// The first blank line: "\n\n", "\r\n\r\n" or "\r\r".
    private static func blockEnd(in data: Data) -> (start: Data.Index, end: Data.Index)? {
        var index = data.startIndex
        while index < data.endIndex {
            for separator in [[UInt8](arrayLiteral: 13, 10, 13, 10), [10, 10], [13, 13]] {
                let end = data.index(index, offsetBy: separator.count, limitedBy: data.endIndex) ?? data.endIndex
                if data.distance(from: index, to: end) == separator.count, data[index..<end].elementsEqual(separator) {
                    return (index, end)
                }
            }
            index = data.index(after: index)
        }
        return nil
    }
}
