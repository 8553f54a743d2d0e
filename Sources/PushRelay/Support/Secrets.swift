/// Compares two secrets' digests without an early exit on the first differing byte, so the time
/// taken says nothing about how much of a guess was right. Different lengths are unequal.
func constantTimeEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    guard lhs.count == rhs.count else { return false }
    var difference: UInt8 = 0
    for (a, b) in zip(lhs, rhs) { difference |= a ^ b }
    return difference == 0
}
