/// A cache that clients can grow, bounded in bytes and shared fairly between the apps it serves:
/// each entry belongs to a group (its app) and is charged the bytes its caller says it costs.
/// Past the bound, the least recently used entries of the group holding the most bytes are
/// evicted, one at a time, so one app filling the cache loses its own oldest entries and an app
/// within its share (the bound over the groups holding entries) keeps all of its own. Nothing is
/// ever cleared all at once but by ``removeAll()``.
///
/// Not thread-safe: its owner keeps it behind a lock. Each group's entries form a doubly linked
/// list through indices into one array, so a hit, an insert, a removal and an eviction are O(1)
/// but for choosing the group to evict from, which looks at every group holding entries.
struct FairCache<Key: Hashable, Value> {
    fileprivate struct Node {
        var key: Key?
        var value: Value?
        var group = -1
        var bytes = 0
        /// Towards the group's most and least recently used ends; -1 at each end.
        var newer = -1
        var older = -1
    }

    private struct Group {
        var name: String
        var newest = -1
        var oldest = -1
        var bytes = 0
        var count = 0
    }

    let maxBytes: Int
    /// Bytes the entries are charged with, in all.
    private(set) var bytes = 0
    private var nodes: [Node] = []
    private var freeNodes: [Int] = []
    private var positions: [Key: Int] = [:]
    private var groups: [Group] = []
    private var freeGroups: [Int] = []
    private var groupPositions: [String: Int] = [:]

    init(maxBytes: Int) { self.maxBytes = maxBytes }

    var count: Int { positions.count }

    /// Bytes the entries of `group` are charged with.
    func bytes(of group: String) -> Int { groupPositions[group].map { groups[$0].bytes } ?? 0 }

    /// The value, now the most recently used of its group.
    mutating func value(for key: Key) -> Value? {
        guard let position = positions[key] else { return nil }
        unlink(position)
        linkNewest(position)
        return nodes[position].value
    }

    /// Keeps `value` for `key` in `group`, charged `bytes`; evicts as described above. A value
    /// costing more than the whole bound is not kept (and an older value for the key is removed).
    mutating func insert(_ value: Value, for key: Key, group: String, bytes entryBytes: Int) {
        removeValue(for: key)
        guard entryBytes <= maxBytes else { return }
        let groupPosition = groupSlot(group)
        let position = Self.place(
            Node(key: key, value: value, group: groupPosition, bytes: entryBytes),
            in: &nodes,
            reusing: &freeNodes
        )
        positions[key] = position
        groups[groupPosition].count += 1
        groups[groupPosition].bytes += entryBytes
        bytes += entryBytes
        linkNewest(position)
        while bytes > maxBytes, let largest = largestGroup() {
            remove(groups[largest].oldest)
        }
    }

    /// Removes the entry for `key`; whether there was one.
    @discardableResult
    mutating func removeValue(for key: Key) -> Bool {
        guard let position = positions[key] else { return false }
        remove(position)
        return true
    }

    mutating func removeAll() {
        self = FairCache(maxBytes: maxBytes)
    }

    private mutating func groupSlot(_ name: String) -> Int {
        if let position = groupPositions[name] { return position }
        let position = Self.place(Group(name: name), in: &groups, reusing: &freeGroups)
        groupPositions[name] = position
        return position
    }

    /// Puts `item` in a free slot of `array`, or at its end; its index.
    private static func place<Item>(_ item: Item, in array: inout [Item], reusing free: inout [Int]) -> Int {
        if let slot = free.popLast() {
            array[slot] = item
            return slot
        }
        array.append(item)
        return array.count - 1
    }

    /// The group holding the most bytes; of equal ones, the first by name (so the choice is the
    /// same on every run).
    private func largestGroup() -> Int? {
        var largest: Int?
        for (name, position) in groupPositions {
            guard let current = largest else {
                largest = position
                continue
            }
            let bytes = groups[position].bytes
            if bytes > groups[current].bytes || (bytes == groups[current].bytes && name < groups[current].name) {
                largest = position
            }
        }
        return largest
    }

    private mutating func remove(_ position: Int) {
        unlink(position)
        let node = nodes[position]
        positions[node.key!] = nil
        let group = node.group
        groups[group].count -= 1
        groups[group].bytes -= node.bytes
        bytes -= node.bytes
        if groups[group].count == 0 {
            groupPositions[groups[group].name] = nil
            freeGroups.append(group)
        }
        nodes[position] = Node()
        freeNodes.append(position)
    }

    private mutating func linkNewest(_ position: Int) {
        let group = nodes[position].group
        let newest = groups[group].newest
        nodes[position].newer = -1
        nodes[position].older = newest
        if newest >= 0 { nodes[newest].newer = position } else { groups[group].oldest = position }
        groups[group].newest = position
    }

    private mutating func unlink(_ position: Int) {
        let node = nodes[position]
        let group = node.group
        if node.newer >= 0 {
            nodes[node.newer].older = node.older
        } else if groups[group].newest == position {
            groups[group].newest = node.older
        }
        if node.older >= 0 {
            nodes[node.older].newer = node.newer
        } else if groups[group].oldest == position {
            groups[group].oldest = node.newer
        }
        nodes[position].newer = -1
        nodes[position].older = -1
    }
}

extension FairCache: Sendable where Key: Sendable, Value: Sendable {}
extension FairCache.Node: Sendable where Key: Sendable, Value: Sendable {}
