import Foundation
import Hummingbird
import Postgres

/// A job's `status`.
enum JobStatus: String, Sendable, Codable, Hashable, CaseIterable {
    /// Stored, waiting for an instance to take it.
    case queued
    /// Taken by an instance under a lease; resumed by another if that one dies.
    case running
    case succeeded
    case failed
    case cancelled
}

/// A bulk-unregister job as the admin API shows it.
struct Job: Sendable, Codable, Hashable, ResponseEncodable {
    var id: UUID
    var appID: String
    var kind: String
    var status: JobStatus
    var propagateToZendesk: Bool
    var total: Int
    var processed: Int
    var removed: Int
    var notFound: Int
    var failed: Int
    /// Tokens of this job that Zendesk has accepted.
    var forwarded: Int
    var error: String?
    var createdAt: Date
    var startedAt: Date?
    var finishedAt: Date?

    enum CodingKeys: String, CodingKey {
        case id, kind, status, total, processed, removed, failed, forwarded, error
        case appID = "app_id"
        case propagateToZendesk = "propagate_to_zendesk"
        case notFound = "not_found"
        case createdAt = "created_at"
        case startedAt = "started_at"
        case finishedAt = "finished_at"
    }
}

/// Jobs in PostgreSQL: the upload, progress, cancellation, and the batches that do the work.
struct JobStore: Sendable {
    static let channel = "push_relay_jobs"
    static let kind = "bulk_unregister"

    let client: PostgresClient
    /// Where removed devices' tokens are queued for Zendesk.
    var zendesk: ZendeskQueue { ZendeskQueue(client: client) }

    /// Creates a job from an upload spooled in `upload` (see ``JobTokenSink``): the job's row and
    /// its tokens (COPY into `job_tokens`) in one short transaction, taken only once the whole
    /// upload has arrived, so a slow client holds no pool connection and no transaction open.
    /// Returns the job's id and its token count; nothing is stored when there is no token.
    func create(app: String, propagate: Bool, upload: JobTokenSink) async throws -> (id: UUID, total: Int) {
        guard upload.count > 0 else { throw JobUploadError.empty }
        try upload.rewind()
        let id = UUID()
        let total = upload.count
        return try await client.withTransaction { session in
            _ = try await session.query(
                """
                INSERT INTO jobs (id, app_id, kind, status, propagate_to_zendesk, parameters, total)
                VALUES ($1, $2, $3, 'queued', $4, jsonb_build_object('propagate_to_zendesk', $4::boolean), $5)
                """,
                [id, app, Self.kind, propagate, total]
            )
            let prefix = Array(id.uuidString.lowercased().utf8) + [UInt8(ascii: "\t")]
            var line = 0
            // A full upload (millions of lines) may take longer than the pool's statement timeout.
            let copy = "COPY job_tokens (job_id, line, token) FROM STDIN"
            _ = try await session.withStatementTimeout(.seconds(600)) {
                try await session.copyIn(copy) { writer in
                    while let chunk = try upload.nextLines() {
                        writer.appendFormatted { buffer in
                            var start = chunk.startIndex
                            while start < chunk.endIndex {
                                let end = chunk[start...].firstIndex(of: UInt8(ascii: "\n")) ?? chunk.endIndex
                                line += 1
                                buffer.append(contentsOf: prefix)
                                buffer.append(contentsOf: String(line).utf8)
                                buffer.append(UInt8(ascii: "\t"))
                                buffer.append(contentsOf: chunk[start..<end])
                                buffer.append(UInt8(ascii: "\n"))
                                start = end + 1
                            }
                        }
                        try await writer.flushIfFull()
                    }
                }
            }
            guard line == total else {
                throw PostgresError(code: .decoding, message: "the upload's spool held \(line) tokens, not \(total)")
            }
            _ = try await session.query("SELECT pg_notify('\(Self.channel)', $1)", [id.uuidString.lowercased()])
            return (id, total)
        }
    }

    enum JobUploadError: Error {
        case empty
    }
}

/// Receives a job's tokens during the upload, checks and normalises each, and spools them, already
/// escaped for COPY, one per line, to an unlinked temporary file: memory stays bounded whatever
/// the upload's size, nothing is left on disk if the process dies, and the database is not touched
/// until ``JobStore/create(app:propagate:upload:)`` copies the file in one short transaction.
final class JobTokenSink {
    /// Bytes gathered before a write to the file, and the most read back at once.
    static let chunkBytes = 1 << 20

    private let descriptor: Int32
    private var buffer: [UInt8] = []
    /// Read back: bytes after the last complete line of the previous read.
    private var leftover: [UInt8] = []
    private var reading = false
    /// Tokens added so far.
    private(set) var count = 0

    /// Opens the spool in the temporary directory (`TMPDIR`, else `/tmp`).
    init() throws {
        var template = Array(
            (NSTemporaryDirectory() as NSString).appendingPathComponent("push-relay-upload-XXXXXX").utf8CString
        )
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard descriptor >= 0 else {
            throw APIError(.internalServerError, code: "upload_spool_failed", message: "cannot store the upload")
        }
        // Unlinked at once: the open descriptor is the only reference, closed in deinit.
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        self.descriptor = descriptor
        buffer.reserveCapacity(Self.chunkBytes)
    }

    deinit { close(descriptor) }

    /// Adds one token if it is 1-``InputRules/maxTokenBytes`` printable ASCII characters without spaces; hex tokens are
    /// lower-cased, as the registry stores them. Returns false (adding nothing) otherwise.
    func add(_ token: some Collection<UInt8>) -> Bool {
        var length = 0
        var allHex = true
        for byte in token {
            guard byte > 0x20, byte < 0x7f else { return false }
            length += 1
            if allHex && !DeviceToken.isHex(byte) { allHex = false }
        }
        guard length > 0, length <= InputRules.maxTokenBytes else { return false }
        count += 1
        for byte in token {
            if byte == UInt8(ascii: "\\") {
                buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            } else if allHex && byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F") {
                buffer.append(byte + 32)
            } else {
                buffer.append(byte)
            }
        }
        buffer.append(UInt8(ascii: "\n"))
        return true
    }

    /// Writes the gathered tokens to the file once they fill a chunk (call between parts of the upload).
    func flushIfFull() throws {
        if buffer.count >= Self.chunkBytes { try flush() }
    }

    private func flush() throws {
        var offset = 0
        while offset < buffer.count {
            let written = buffer.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else {
                throw APIError(.internalServerError, code: "upload_spool_failed", message: "cannot store the upload")
            }
            offset += written
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Ends the writing and goes back to the first token.
    func rewind() throws {
        try flush()
        guard lseek(descriptor, 0, SEEK_SET) == 0 else {
            throw APIError(.internalServerError, code: "upload_spool_failed", message: "cannot read the stored upload")
        }
        reading = true
        leftover = []
    }

    /// The next complete lines (each token with its newline), up to about ``chunkBytes``; `nil` at the end.
    func nextLines() throws -> ArraySlice<UInt8>? {
        precondition(reading, "rewind() before reading")
        var chunk = leftover
        leftover = []
        var part = [UInt8](repeating: 0, count: Self.chunkBytes)
        while true {
            let got = part.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
            if got < 0 && errno == EINTR { continue }
            guard got >= 0 else {
                throw APIError(
                    .internalServerError,
                    code: "upload_spool_failed",
                    message: "cannot read the stored upload"
                )
            }
            if got == 0 {
                // Every token was written with its newline, so nothing is left over at the end.
                return chunk.isEmpty ? nil : chunk[...].dropLast()
            }
            chunk += part[..<got]
            if let last = chunk.lastIndex(of: UInt8(ascii: "\n")) {
                leftover = Array(chunk[(last + 1)...])
                return chunk[..<last]
            }
        }
    }
}

extension JobStore {

    private static let columns = """
        j.id, j.app_id, j.kind, j.status, j.propagate_to_zendesk, j.total, j.processed, j.removed, j.not_found, j.failed,
        (SELECT count(*) FROM zendesk_unregister_queue z WHERE z.job_id = j.id AND z.forwarded_at IS NOT NULL)::bigint,
        j.error, j.created_at, j.started_at, j.finished_at
        """

    private static func decode(_ row: PostgresRow) throws -> Job {
        let (id, app, kind, status, propagate, total, processed, removed) = try row.decode(
            (UUID, String, String, String, Bool, Int, Int, Int).self
        )
        guard let status = JobStatus(rawValue: status) else {
            throw PostgresError(code: .decoding, message: "unknown job status \(status)")
        }
        return Job(
            id: id,
            appID: app,
            kind: kind,
            status: status,
            propagateToZendesk: propagate,
            total: total,
            processed: processed,
            removed: removed,
            notFound: try row.decode(Int.self, at: 8),
            failed: try row.decode(Int.self, at: 9),
            forwarded: try row.decode(Int.self, at: 10),
            error: try row.decode(String?.self, at: 11),
            createdAt: try row.decode(Date.self, at: 12),
            startedAt: try row.decode(Date?.self, at: 13),
            finishedAt: try row.decode(Date?.self, at: 14)
        )
    }

    func get(_ id: UUID) async throws -> Job? {
        try await client.query("SELECT \(Self.columns) FROM jobs j WHERE j.id = $1", [id]).first.map(Self.decode)
    }

    func list(limit: Int, app: String?) async throws -> [Job] {
        try await client.query(
            "SELECT \(Self.columns) FROM jobs j WHERE $2::text IS NULL OR j.app_id = $2 ORDER BY j.created_at DESC LIMIT $1",
            [limit, app]
        ).rows.map(Self.decode)
    }

    /// Cancels a queued or running job; a finished job stays as it is. Returns the job after.
    /// The job's uploaded tokens and batch records go with the cancellation, in its transaction:
    /// nothing will read them again (a batch still running on another instance finds the job no
    /// longer its own and records nothing).
    func cancel(_ id: UUID) async throws -> Job? {
        try await client.withTransaction { session in
            let cancelled = try await session.query(
                "UPDATE jobs SET status = 'cancelled', finished_at = now(), lease_owner = NULL WHERE id = $1 AND status IN ('queued', 'running')",
                [id]
            )
            if cancelled.affectedRows > 0 {
                _ = try await session.query("DELETE FROM job_tokens WHERE job_id = $1", [id])
                _ = try await session.query("DELETE FROM job_batches WHERE job_id = $1", [id])
            }
        }
        return try await get(id)
    }

    /// A job claimed to run: its size, its batch size and the batches already done.
    struct Claimed: Sendable {
        var id: UUID
        var app: String
        var propagate: Bool
        var total: Int
        var batchSize: Int
        var done: Set<Int>
    }

    /// Takes the oldest runnable job whose lease is free (queued, or running on an instance whose
    /// lease ran out), for `owner`. The batch size is fixed at the first run.
    func claim(owner: String, lease: Double, batchSize: Int) async throws -> Claimed? {
        guard
            let row = try await client.query(
                """
                UPDATE jobs j SET status = 'running', lease_owner = $1, lease_expires_at = now() + make_interval(secs => $2),
                    started_at = coalesce(j.started_at, now()), batch_size = coalesce(j.batch_size, $3)
                WHERE j.id = (
                    SELECT id FROM jobs WHERE status IN ('queued', 'running') AND (lease_expires_at IS NULL OR lease_expires_at < now())
                    ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED
                )
                RETURNING j.id, j.app_id, j.propagate_to_zendesk, j.total, j.batch_size
                """,
                [owner, lease, batchSize]
            ).first
        else { return nil }
        let (id, app, propagate, total, size) = try row.decode((UUID, String, Bool, Int, Int).self)
        let done = try await client.query("SELECT first_line FROM job_batches WHERE job_id = $1", [id]).rows.map {
            try $0.decode(Int.self, at: 0)
        }
        return Claimed(id: id, app: app, propagate: propagate, total: total, batchSize: size, done: Set(done))
    }

    /// One batch, in one transaction: lines `first ..< first + size` are deleted from the registry
    /// with one set-based DELETE, counted, recorded in `job_batches`, and (when asked) queued for
    /// Zendesk. Several batches of one job may run at once. Returns the batch's lines and removed
    /// devices, or nil, doing nothing, when the job is no longer this owner's to run (cancelled, or
    /// taken over after a lost lease).
    func runBatch(
        job: UUID,
        app: String,
        propagate: Bool,
        first: Int,
        size: Int,
        owner: String,
        lease: Double
    ) async throws -> (lines: Int, removed: Int)? {
        try await client.withTransaction { session in
            guard
                let row = try await session.query(
                    """
                    WITH allowed AS MATERIALIZED (
                        SELECT 1 FROM jobs WHERE id = $1 AND status = 'running' AND lease_owner = $6
                    ),
                    batch AS MATERIALIZED (
                        SELECT line, token FROM job_tokens
                        WHERE job_id = $1 AND line >= $3 AND line < $3 + $4 AND EXISTS (SELECT 1 FROM allowed)
                    ),
                    deleted AS (
                        DELETE FROM devices d USING batch b
                        WHERE d.app_id = $2 AND d.token = b.token
                        RETURNING d.token, d.platform
                    ),
                    counts AS (
                        SELECT (SELECT count(*) FROM batch) AS lines, (SELECT count(*) FROM deleted) AS removed
                    ),
                    recorded AS (
                        INSERT INTO job_batches (job_id, first_line, last_line, removed, not_found)
                        SELECT $1, $3, $3 + $4 - 1, removed, lines - removed FROM counts WHERE EXISTS (SELECT 1 FROM allowed)
                        RETURNING 1
                    ),
                    updated AS (
                        UPDATE jobs j SET processed = j.processed + counts.lines, removed = j.removed + counts.removed,
                            not_found = j.not_found + counts.lines - counts.removed, lease_expires_at = now() + make_interval(secs => $7)
                        FROM counts
                        WHERE j.id = $1 AND EXISTS (SELECT 1 FROM recorded)
                        RETURNING counts.lines, counts.removed
                    )
                    SELECT u.lines, u.removed,
                        CASE WHEN $5 THEN (SELECT array_agg(token) FROM deleted) END,
                        CASE WHEN $5 THEN (SELECT array_agg(platform) FROM deleted) END
                    FROM updated u
                    """,
                    [job, app, first, size, propagate, owner, lease]
                ).first
            else { return nil }
            let (lines, removed, tokens, platforms) = try row.decode((Int, Int, [String]?, [String]?).self)
            // Removed devices' tokens go to the Zendesk queue in the same transaction.
            if let tokens, let platforms {
                try await zendesk.queueForZendesk(
                    app: app,
                    tokens: tokens,
                    platforms: platforms,
                    reason: "bulk_unregister",
                    job: job,
                    in: session
                )
            }
            return (lines, removed)
        }
    }

    /// Marks the job done and drops its uploaded tokens.
    func finish(_ id: UUID, owner: String, status: JobStatus, error: String? = nil) async throws {
        try await client.withTransaction { session in
            _ = try await session.query(
                "UPDATE jobs SET status = $3, error = $4, finished_at = now(), lease_owner = NULL, lease_expires_at = NULL WHERE id = $1 AND "
                    + "lease_owner = $2",
                [id, owner, status.rawValue, error]
            )
        }
        _ = try await client.query("DELETE FROM job_tokens WHERE job_id = $1", [id])
        _ = try await client.query("DELETE FROM job_batches WHERE job_id = $1", [id])
    }
}
