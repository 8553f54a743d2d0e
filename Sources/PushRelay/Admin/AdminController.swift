import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// The admin API (admin API keys only): bulk-unregister jobs.
struct AdminController<Context: RequestContext>: Sendable {
    let store: JobStore
    let authenticator: Authenticator
    /// Most bytes of a JSON upload.
    let maxJSONBytes: Int
    /// Most bytes of a text or CSV upload (`jobs.max_upload_bytes`).
    let maxTextBytes: Int

    var endpoints: RouteCollection<Context> {
        RouteCollection(context: Context.self)
            .post("/v1/admin/apps/{app}/devices/bulk-unregister", use: bulkUnregister)
            .get("/v1/admin/jobs", use: list)
            .get("/v1/admin/jobs/{id}", use: show)
            .post("/v1/admin/jobs/{id}/cancel", use: cancel)
    }

    struct Created: ResponseEncodable {
        var jobID: UUID
        var total: Int
        enum CodingKeys: String, CodingKey {
            case jobID = "job_id"
            case total
        }
    }

    struct JobList: ResponseEncodable {
        var jobs: [Job]
    }

    /// `POST /v1/admin/apps/{app}/devices/bulk-unregister`: either JSON
    /// `{"tokens":[…],"propagate_to_zendesk":bool}` or a `text/plain` / `text/csv` body of one token
    /// per line (first column; `?propagate_to_zendesk=true`) of at most ``maxTextBytes``, checked
    /// as it arrives and spooled to a temporary file (``JobTokenSink``); the job is stored once the
    /// upload is complete, so no database connection waits on the client.
    @Sendable func bulkUnregister(_ request: Request, context: Context) async throws -> EditedResponse<Created> {
        let (app, principal) = try await authenticator.resolve(request, context: context)
        try principal.requireAdmin()
        let type = (request.headers[.contentType] ?? "").lowercased()
        // Checked whatever the body's type: a JSON body's own field wins over it.
        let queryFlag = try Self.flag(request.uri.queryParameters["propagate_to_zendesk"].map(String.init))
        let created: (id: UUID, total: Int)
        do {
            let upload: (sink: JobTokenSink, propagate: Bool)
            if type.hasPrefix("application/json") {
                upload = try await spoolJSON(request, propagate: queryFlag)
            } else if type.hasPrefix("text/plain") || type.hasPrefix("text/csv") {
                upload = (try await spoolLines(request, csv: type.hasPrefix("text/csv")), queryFlag)
            } else {
                throw APIError(
                    .unsupportedMediaType,
                    code: "unsupported_media_type",
                    message: "Content-Type must be application/json, text/plain or text/csv"
                )
            }
            created = try await store.create(app: app, propagate: upload.propagate, upload: upload.sink)
        } catch JobStore.JobUploadError.empty {
            throw JSONBody.invalidField("tokens", "must list at least one token")
        }
        context.logger.info(
            "bulk-unregister job queued",
            metadata: ["push.app": "\(app)", "push.job": "\(created.id)", "push.tokens": "\(created.total)"]
        )
        return EditedResponse(status: .accepted, response: Created(jobID: created.id, total: created.total))
    }

    /// A JSON upload's tokens, checked and spooled, and its `propagate_to_zendesk` (the query's
    /// flag when the body has none).
    private func spoolJSON(
        _ request: Request,
        propagate queryFlag: Bool
    ) async throws -> (sink: JobTokenSink, propagate: Bool) {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: maxJSONBytes)
        } catch {
            throw APIError(
                .contentTooLarge,
                code: "payload_too_large",
                message:
                    "a JSON upload may be at most \(maxJSONBytes) bytes; send text/plain with one token per line for more"
            )
        }
        let body = try JSONBody(buffer: buffer)
        let tokens = try body.stringArray("tokens")
        let propagate = try body.optionalBool("propagate_to_zendesk") ?? queryFlag
        let sink = try JobTokenSink()
        for (index, token) in tokens.enumerated() {
            guard sink.add(token.utf8) else {
                throw JSONBody.invalidField(
                    "tokens[\(index)]",
                    "must be a device token (1-\(InputRules.maxTokenBytes) printable characters without spaces)"
                )
            }
            if index % 4096 == 0 { try sink.flushIfFull() }
        }
        return (sink, propagate)
    }

    /// A text or CSV upload read to its end, each line checked and spooled to a file, before the
    /// database is touched.
    private func spoolLines(_ request: Request, csv: Bool) async throws -> JobTokenSink {
        if let declared = request.headers[.contentLength].flatMap({ Int($0) }), declared > maxTextBytes {
            throw uploadTooLarge()
        }
        let sink = try JobTokenSink()
        var lines = LineSplitter()
        var number = 0
        var received = 0
        for try await chunk in request.body {
            received += chunk.readableBytes
            guard received <= maxTextBytes else { throw uploadTooLarge() }
            do {
                try lines.feed(chunk) { line in
                    number += 1
                    try Self.add(line: line, number: number, csv: csv, to: sink)
                }
            } catch is LineSplitter.LineTooLong {
                throw JSONBody.invalidField("line \(number + 1)", "is longer than \(LineSplitter.maxLineBytes) bytes")
            }
            try sink.flushIfFull()
        }
        if let line = lines.finish() {
            number += 1
            try Self.add(line: line, number: number, csv: csv, to: sink)
        }
        return sink
    }

    @Sendable func list(_ request: Request, context: Context) async throws -> JobList {
        try await authenticator.resolve(request).requireAdmin()
        let limit = try InputRules.pageLimit(request.uri.queryParameters["limit"])
        let app = try request.uri.queryParameters["app"].map {
            try InputRules.identifier(String($0), field: "app", maxBytes: 256)
        }
        return JobList(jobs: try await store.list(limit: limit, app: app))
    }

    @Sendable func show(_ request: Request, context: Context) async throws -> Job {
        try await authenticator.resolve(request).requireAdmin()
        guard let job = try await store.get(try jobID(context)) else { throw Self.jobNotFound }
        return job
    }

    @Sendable func cancel(_ request: Request, context: Context) async throws -> Job {
        try await authenticator.resolve(request).requireAdmin()
        guard let job = try await store.cancel(try jobID(context)) else { throw Self.jobNotFound }
        return job
    }

    // MARK: Helpers

    private func uploadTooLarge() -> APIError {
        APIError(
            .contentTooLarge,
            code: "payload_too_large",
            message:
                "a text upload may be at most \(maxTextBytes) bytes (jobs.max_upload_bytes); split the tokens into several jobs"
        )
    }

    static var jobNotFound: APIError { APIError(.notFound, code: "job_not_found", message: "no such job") }

    private func jobID(_ context: Context) throws -> UUID {
        guard let id = UUID(uuidString: try context.pathParameter("id")) else { throw Self.jobNotFound }
        return id
    }

    private static func flag(_ value: String?) throws -> Bool {
        switch value?.lowercased() {
        case nil, "", "false", "0": return false
        case "true", "1": return true
        default: throw JSONBody.invalidField("propagate_to_zendesk", "must be true or false")
        }
    }

    /// Adds the token on one line: surrounding blanks are ignored and blank lines skipped; in CSV
    /// the first field, without quotes, and a `token` header on line 1 is skipped. Anything that is
    /// not a token is a 400 naming the line (the whole upload is then discarded).
    static func add(line: ArraySlice<UInt8>, number: Int, csv: Bool, to sink: JobTokenSink) throws {
        var field = line
        if csv, let comma = field.firstIndex(of: UInt8(ascii: ",")) { field = field[..<comma] }
        let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || (csv && $0 == UInt8(ascii: "\"")) }
        while let first = field.first, blank(first) { field = field.dropFirst() }
        while let last = field.last, blank(last) { field = field.dropLast() }
        if field.isEmpty { return }
        if csv && number == 1 && field.elementsEqual("token".utf8) { return }
        guard sink.add(field) else {
            throw JSONBody.invalidField(
                "line \(number)",
                "is not a device token (1-\(InputRules.maxTokenBytes) printable characters without spaces)"
            )
        }
    }
}

/// Splits a byte stream into lines (`\n` or `\r\n`) across chunk boundaries. A line longer than
/// ``maxLineBytes`` is an error as soon as its bytes are seen, so an upload without newlines cannot
/// make the relay buffer it whole.
struct LineSplitter {
    /// Far above a token (1024 bytes) plus the other columns a CSV export may carry.
    static let maxLineBytes = 64 * 1024

    struct LineTooLong: Error {}

    private var pending: [UInt8] = []

    /// Calls `line` with each complete line of `chunk` (and of what earlier chunks left over).
    mutating func feed(_ chunk: ByteBuffer, _ line: (ArraySlice<UInt8>) throws -> Void) throws {
        let bytes = Array(chunk.readableBytesView)
        var start = 0
        while let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) {
            if pending.isEmpty {
                try line(Self.trimCR(bytes[start..<newline]))
            } else {
                pending.append(contentsOf: bytes[start..<newline])
                try line(Self.trimCR(pending[...]))
                pending.removeAll(keepingCapacity: true)
            }
            start = newline + 1
        }
        pending.append(contentsOf: bytes[start...])
        if pending.count > Self.maxLineBytes { throw LineTooLong() }
    }

    /// The last line, when the stream did not end with a newline.
    mutating func finish() -> ArraySlice<UInt8>? {
        guard !pending.isEmpty else { return nil }
        defer { pending = [] }
        return Self.trimCR(pending[...])
    }

    private static func trimCR(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        line.last == UInt8(ascii: "\r") ? line.dropLast() : line
    }
}
