/// A user's unread replies: the total and the count of each ticket with unread replies.
///
/// Counts are uncapped, as the relay keeps them; ``badge(_:)`` applies a display rule.
public struct UnreadCount: Sendable, Hashable, CustomStringConvertible {
    /// Every unread reply of the user, across tickets.
    public var total: Int
    /// Unread replies by ticket id; tickets with none are absent.
    public var tickets: [String: Int]

    public static let zero = UnreadCount(total: 0, tickets: [:])

    public init(total: Int, tickets: [String: Int]) {
        self.total = total
        self.tickets = tickets
    }

    /// The unread replies of one ticket (0 when it has none).
    public func unread(ticket: String) -> Int { tickets[ticket] ?? 0 }

    /// How a badge shows `total`: nothing at 0, else as `style` says.
    public func badge(_ style: BadgeStyle = .capped(at: 99)) -> Badge {
        guard total > 0 else { return .hidden }
        switch style {
        case .number: return .text(String(total))
        case .capped(let limit): return .text(total > limit ? "\(limit)+" : String(total))
        case .dot: return .dot
        }
    }

    public var description: String {
        let perTicket = tickets.sorted { $0.key < $1.key }.map { "ticket \($0.key): \($0.value)" }
        return perTicket.isEmpty ? "\(total)" : "\(total) (\(perTicket.joined(separator: ", ")))"
    }
}

/// How a badge shows a count.
public enum BadgeStyle: Sendable, Hashable {
    /// The number as it is.
    case number
    /// The number up to `limit`, then "`limit`+" ("99+").
    case capped(at: Int)
    /// A dot without a number.
    case dot
}

/// What to show on a badge.
public enum Badge: Sendable, Hashable {
    /// Nothing is unread: no badge.
    case hidden
    /// A number, or "99+".
    case text(String)
    /// A dot only.
    case dot
}

extension UnreadCount: Decodable {
    private struct Ticket: Decodable {
        var ticket_id: String
        var unread: Int
    }

    private enum CodingKeys: String, CodingKey {
        case total
        case tickets
    }

    /// Decodes the relay's `{"total":N,"tickets":[{"ticket_id","unread"}]}`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        total = try container.decode(Int.self, forKey: .total)
        let list = try container.decode([Ticket].self, forKey: .tickets)
        tickets = Dictionary(list.map { ($0.ticket_id, $0.unread) }, uniquingKeysWith: +)
    }
}
