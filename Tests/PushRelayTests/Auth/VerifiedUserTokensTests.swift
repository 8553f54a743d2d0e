import Foundation
import Testing

@testable import PushRelay

/// The cache of checked user tokens across key rotations (``Authenticator/VerifiedUserTokens``).
@Suite("Verified user tokens and key epochs")
struct VerifiedUserTokensTests {
    @Test("a token checked against keys a reload has since replaced is not cached into the new epoch")
    func checkAcrossAReload() {
        let tokens = Authenticator.VerifiedUserTokens(maxBytes: 1 << 20)
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

    @Test("padded tokens cost no more than short ones, the cache stays within its bytes, and one app's flood evicts only its own oldest tokens")
    func boundedInBytesAndShared() {
        let bound = 256 << 10
        let tokens = Authenticator.VerifiedUserTokens(maxBytes: bound)
        let expires = Date().addingTimeInterval(600)
        let epoch = tokens.epoch
        for user in ["alice", "bob", "carol"] {
            tokens.remember(app: "quiet", token: "\(user).jwt.x", subject: user, expires: expires, epoch: epoch)
        }
        let quiet = tokens.bytes(of: "quiet")
        // Tokens padded to the longest accepted, each valid in its app: charged by subject, not length.
        let padding = String(repeating: "A", count: Authenticator.maxUserTokenBytes - 64)
        for index in 0..<10_000 {
            tokens.remember(app: "noisy", token: "h.\(padding)\(index).s", subject: "u\(index)", expires: expires, epoch: epoch)
            #expect(tokens.bytes <= bound)
        }
        #expect(tokens.bytes(of: "noisy") > bound / 2, "the flood fills what the quiet app does not use")
        for user in ["alice", "bob", "carol"] {
            #expect(tokens.subject(app: "quiet", token: "\(user).jwt.x", now: Date()) == user, "\(user)'s token was evicted by another app")
        }
        #expect(tokens.bytes(of: "quiet") == quiet)
        #expect(tokens.subject(app: "noisy", token: "h.\(padding)0.s", now: Date()) == nil, "the oldest went first")
        #expect(tokens.subject(app: "noisy", token: "h.\(padding)9999.s", now: Date()) == "u9999")
        // The same token text in another app is another entry.
        #expect(tokens.subject(app: "quiet", token: "h.\(padding)9999.s", now: Date()) == nil)
    }
}
