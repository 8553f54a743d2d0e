import Foundation
import Testing

@testable import PushRelay

/// The cache of checked user tokens across key rotations (``Authenticator/VerifiedUserTokens``).
@Suite("Verified user tokens and key epochs")
struct VerifiedUserTokensTests {
    @Test("a token checked against keys a reload has since replaced is not cached into the new epoch")
    func checkAcrossAReload() {
        let tokens = Authenticator.VerifiedUserTokens()
        let expires = Date().addingTimeInterval(600)
        // A check starts: it reads the epoch, then the app's keys (the old ones).
        let before = tokens.epoch
        // A reload installs new keys and forgets what was checked.
        tokens.forget()
        // The check ends with a token the old keys accepted: it must not be honoured from now on.
        #expect(tokens.remember(app: "support", token: "forged.jwt.x", subject: "mallory", expires: expires, epoch: before) == false)
        #expect(tokens.subject(app: "support", token: "forged.jwt.x", now: Date()) == nil)

        // A check made wholly within the new epoch is kept, until the next reload.
        let now = tokens.epoch
        #expect(now != before)
        #expect(tokens.remember(app: "support", token: "good.jwt.x", subject: "alice", expires: expires, epoch: now))
        #expect(tokens.subject(app: "support", token: "good.jwt.x", now: Date()) == "alice")
        #expect(tokens.subject(app: "support", token: "good.jwt.x", now: expires.addingTimeInterval(1)) == nil, "expired")
        tokens.forget()
        #expect(tokens.subject(app: "support", token: "good.jwt.x", now: Date()) == nil)
    }
}
