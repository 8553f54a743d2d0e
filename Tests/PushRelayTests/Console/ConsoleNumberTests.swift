import Configuration
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Postgres
import TestSupport
import Testing

@testable import PushRelay

@Suite("Console: the API's answers, read through the API's own types")
struct ConsoleNumberTests {
    static func jobs(total: String) -> ConsoleAPIAnswer {
        let json = """
            {"jobs":[{"id":"E621E1F8-C36C-495A-93FC-0C247A3E6E5F","app_id":"support","kind":"bulk_unregister","status":"running",
            "propagate_to_zendesk":false,"total":\(total),"processed":1,"removed":1,"not_found":0,"failed":0,"forwarded":0,"error":null,
            "created_at":"2026-11-24T11:30:05Z","started_at":"2026-11-24T11:30:06Z","finished_at":null}]}
            """
        return ConsoleAPIAnswer(status: .ok, bytes: Array(json.utf8))
    }

    @Test("numbers beyond any integer (1e300, a fraction, past Int64) make the answer unreadable, shown as an error, never a trap")
    func extremeNumbers() throws {
        let job = try #require(Self.jobs(total: "42").value(ConsoleAPIList<Job>.self)?.items.first)
        #expect(ConsoleView.JobRow(job).total == 42)
        #expect(ConsoleView.JobRow(job).createdAt == "2026-11-24 11:30:05 UTC")
        for total in ["1e300", "1.5", "-1e300", "9223372036854775808"] {
            let answer = Self.jobs(total: total)
            #expect(answer.value(ConsoleAPIList<Job>.self) == nil, "\(total)")
            #expect(answer.errorMessage == "the API's answer (HTTP 200) could not be read", "\(total)")
        }
    }
}
