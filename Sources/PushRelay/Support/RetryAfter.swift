import Foundation

/// The `Retry-After` header of a provider's, Zendesk's or an event receiver's answer (RFC 9110
/// §10.2.3), read with bounds: whatever the peer sends, the result is a number of seconds from 0
/// to ``ceiling``, or `nil` when the header is absent or not one of the forms below.
///
/// - delay-seconds, `1*DIGIT`: any number of digits; a value past ``ceiling`` saturates there
///   (the peer asked for "a very long time", which the caller caps by its own setting).
/// - HTTP-date: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), and the obsolete RFC 850
///   (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`) forms, which a
///   recipient must still accept. A date in the past means now (0 seconds).
///
/// A sign, a fraction, an exponent, `NaN` or `inf` are not `Retry-After` and give `nil`: the
/// caller then backs off by its own schedule. Nothing here can trap, so no answer from the network
/// can take the relay down through this header.
enum RetryAfter {
    /// The largest number of seconds returned (about 68 years): far above any cap a caller uses,
    /// small enough that converting it to milliseconds or adding it to a date cannot overflow.
    static let ceiling = Int(Int32.max)

    /// The seconds to wait that `header` asks for, measured from `now` for a date.
    static func seconds(_ header: String?, now: Date = Date()) -> Int? {
        guard let header else { return nil }
        let bytes = Array(
            header.utf8.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed()
        )
        guard !bytes.isEmpty else { return nil }
        if bytes.allSatisfy(isDigit) {
            var value = 0
            for byte in bytes {
                value = value * 10 + Int(byte - 0x30)
                if value >= ceiling { return ceiling }
            }
            return value
        }
        // The dates are 24 to 33 bytes long; anything longer is not one.
        guard bytes.count <= 40, let date = date(bytes) else { return nil }
        let seconds = (date - now.timeIntervalSince1970).rounded(.up)
        guard seconds.isFinite else { return nil }
        return Int(min(max(seconds, 0), Double(ceiling)))
    }

    /// Seconds since 1970 of an HTTP-date in one of its three forms, or `nil`.
    static func date(_ bytes: [UInt8]) -> Double? {
        guard let text = String(validating: bytes, as: UTF8.self), text.allSatisfy(\.isASCII) else { return nil }
        let words = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        let fields: (day: Int, month: Int, year: Int, time: String)
        if words.count == 6, words[0].count == 4, words[0].hasSuffix(","), words[5] == "GMT",
            let day = number(words[1], digits: 2), let month = month(words[2]), let year = number(words[3], digits: 4)
        {
            // IMF-fixdate: day-name "," SP day SP month SP year SP time-of-day SP GMT
            guard days.contains(String(words[0].dropLast())) else { return nil }
            fields = (day, month, year, words[4])
        } else if words.count == 4, words[0].hasSuffix(","), words[3] == "GMT",
            longDays.contains(String(words[0].dropLast()))
        {
            // RFC 850: day-name-l "," SP day "-" month "-" 2DIGIT SP time-of-day SP GMT
            let parts = words[1].split(separator: "-", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3, let day = number(parts[0], digits: 2), let month = month(parts[1]),
                let short = number(parts[2], digits: 2)
            else { return nil }
            fields = (day, month, fullYear(short), words[2])
        } else if words.count == 5, days.contains(words[0]), let month = month(words[1]),
            let day = number(words[2], digits: 1...2),
            let year = number(words[4], digits: 4)
        {
            // asctime: day-name SP month SP ( 2DIGIT / ( SP DIGIT )) SP time-of-day SP year
            fields = (day, month, year, words[3])
        } else {
            return nil
        }
        let clock = fields.time.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard clock.count == 3, let hour = number(clock[0], digits: 2), let minute = number(clock[1], digits: 2),
            let second = number(clock[2], digits: 2), hour < 24, minute < 60, second <= 60,
            (1...12).contains(fields.month), (1...daysIn(month: fields.month, year: fields.year)).contains(fields.day)
        else { return nil }
        let day = daysFromCivil(year: fields.year, month: fields.month, day: fields.day)
        return Double(day) * 86400 + Double(hour * 3600 + minute * 60 + second)
    }

    private static let days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let longDays = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    private static func month(_ name: String) -> Int? { months.firstIndex(of: name).map { $0 + 1 } }

    private static func number(_ text: String, digits: Int) -> Int? { number(text, digits: digits...digits) }

    /// A number of exactly `digits` ASCII digits (so at most four: no overflow).
    private static func number(_ text: String, digits: ClosedRange<Int>) -> Int? {
        guard digits.contains(text.utf8.count), text.utf8.allSatisfy(isDigit) else { return nil }
        return text.utf8.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }

    /// RFC 9110: a two-digit year that would be more than 50 years in the future is in the past century.
    private static func fullYear(_ short: Int, now: Date = Date()) -> Int {
        let thisYear = 1970 + Int(now.timeIntervalSince1970 / 31_556_952)
        var year = thisYear - thisYear % 100 + short
        if year > thisYear + 50 { year -= 100 }
        return year
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
