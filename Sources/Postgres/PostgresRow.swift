/// The rows and command status of one statement, copied out of libpq's result.
public struct PostgresQueryResult: Sendable {
    /// Column names in result order.
    public let columns: [String]
    /// The rows, each holding text-format values.
    public let rows: [PostgresRow]
    /// Rows touched by INSERT/UPDATE/DELETE/COPY (libpq's `PQcmdTuples`), or the row count for SELECT.
    public let affectedRows: Int

    /// The first row, if any.
    public var first: PostgresRow? { rows.first }
}

/// One result row. Values are kept in PostgreSQL's text format and decoded on request.
public struct PostgresRow: Sendable {
    let columnIndex: ColumnIndex
    let values: [String?]

    final class ColumnIndex: Sendable {
        let names: [String]
        let positions: [String: Int]
        init(names: [String]) {
            self.names = names
            var positions: [String: Int] = [:]
            for (index, name) in names.enumerated() where positions[name] == nil { positions[name] = index }
            self.positions = positions
        }
    }

    /// The number of columns.
    public var count: Int { values.count }

    /// The raw text of a column, `nil` for SQL NULL.
    public func text(at index: Int) -> String? { values[index] }

    /// Decodes the column at `index`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, at index: Int) throws -> T {
        guard values.indices.contains(index) else {
            throw PostgresError(code: .decoding, message: "column index \(index) out of range (\(values.count) columns)")
        }
        return try T.decodeNullable(values[index])
    }

    /// Decodes the column named `column`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, column: String) throws -> T {
        guard let index = columnIndex.positions[column] else {
            throw PostgresError(code: .decoding, message: "no column named \(column)")
        }
        return try T.decodeNullable(values[index])
    }

    /// Decodes the leading columns as a tuple: `let (id, name) = try row.decode((Int, String).self)`.
    public func decode<each T: PostgresDecodable>(_ types: (repeat each T).Type) throws -> (repeat each T) {
        var index = 0
        func next<V: PostgresDecodable>(_: V.Type) throws -> V {
            defer { index += 1 }
            return try decode(V.self, at: index)
        }
        return (repeat try next((each T).self))
    }
}
