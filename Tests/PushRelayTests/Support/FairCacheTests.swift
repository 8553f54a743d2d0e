import Testing

@testable import PushRelay

/// ``FairCache``: bounded in bytes, least recently used first, evicting from the largest group.
@Suite("FairCache")
struct FairCacheTests {
    @Test("past the bound the least recently used entry of the group holding the most bytes goes, one at a time")
    func evictsFromTheLargestGroup() {
        var cache = FairCache<String, Int>(maxBytes: 100)
        cache.insert(1, for: "a1", group: "a", bytes: 30)
        cache.insert(2, for: "a2", group: "a", bytes: 30)
        cache.insert(3, for: "b1", group: "b", bytes: 40)
        #expect(cache.value(for: "a1") == 1)  // a2 is now a's least recently used
        cache.insert(4, for: "a3", group: "a", bytes: 30)  // 130 bytes: a (90) loses a2
        #expect(cache.value(for: "a2") == nil)
        #expect([cache.value(for: "a1"), cache.value(for: "a3"), cache.value(for: "b1")] == [1, 4, 3])
        #expect(cache.bytes == 100 && cache.bytes(of: "a") == 60 && cache.bytes(of: "b") == 40 && cache.count == 3)
        // b grows past a: now b pays for its own growth.
        cache.insert(5, for: "b2", group: "b", bytes: 30)  // 130 bytes: b (70) loses b1
        #expect(cache.bytes <= 100)
        #expect(cache.value(for: "b1") == nil, "b's oldest")
        #expect(cache.bytes(of: "a") == 60, "a, the smaller, kept everything")
        // A value larger than the whole bound is not kept, and replaces nothing but its own key.
        cache.insert(6, for: "a1", group: "a", bytes: 101)
        #expect(cache.value(for: "a1") == nil && cache.value(for: "a3") == 4)
        cache.removeAll()
        #expect(cache.count == 0 && cache.bytes == 0 && cache.bytes(of: "a") == 0)
    }

    @Test("random inserts, hits and removals agree with a plain model of the same rule")
    func agreesWithAModel() {
        struct Model {
            var entries: [(key: Int, group: String, bytes: Int, value: Int)] = []  // oldest first
            mutating func touch(_ key: Int) -> Int? {
                guard let index = entries.firstIndex(where: { $0.key == key }) else { return nil }
                let entry = entries.remove(at: index)
                entries.append(entry)
                return entry.value
            }
            mutating func insert(_ value: Int, key: Int, group: String, bytes: Int, max: Int) {
                entries.removeAll { $0.key == key }
                guard bytes <= max else { return }
                entries.append((key, group, bytes, value))
                while entries.reduce(0, { $0 + $1.bytes }) > max {
                    var perGroup: [String: Int] = [:]
                    for entry in entries { perGroup[entry.group, default: 0] += entry.bytes }
                    let largest = perGroup.values.max()!
                    let group = perGroup.filter { $0.value == largest }.keys.min()!  // ties: the first by name
                    let victim = entries.firstIndex { $0.group == group }!
                    entries.remove(at: victim)
                }
            }
        }
        var random = SplitMix(seed: 20_261_206)
        var cache = FairCache<Int, Int>(maxBytes: 500)
        var model = Model()
        for step in 0..<20_000 {
            let key = Int(random.next() % 60)
            let group = ["a", "b", "c"][key % 3]
            switch random.next() % 3 {
            case 0:
                #expect(cache.value(for: key) == model.touch(key))
            case 1:
                let bytes = Int(random.next() % 90) + 1
                cache.insert(step, for: key, group: group, bytes: bytes)
                model.insert(step, key: key, group: group, bytes: bytes, max: 500)
            default:
                #expect(cache.removeValue(for: key) == model.entries.contains { $0.key == key })
                model.entries.removeAll { $0.key == key }
            }
            #expect(cache.count == model.entries.count)
            #expect(cache.bytes == model.entries.reduce(0) { $0 + $1.bytes })
            #expect(cache.bytes <= 500)
        }
    }
}

/// A small deterministic generator for the model test.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
