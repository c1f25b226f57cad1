/// The entries of a ``KeyedMonoTask``: a dictionary from key to slot, a dense array of nodes,
/// and an intrusive doubly linked least-recently-used list threaded through the slots by index.
/// The links live in an array of their own, parallel to `nodes`: a hit that moves its node to
/// the head writes its neighbours' links, and 8-byte links keep those writes in a small, dense
/// array instead of scattering them over the nodes.
///
/// A pure value type, owned by ``KeyedMonoTaskStateMachine``. Every operation is O(1) (one or
/// two hash lookups plus a few array writes):
/// - the nodes are dense (`nodes.count == count`): removing a node moves the last node into its
///   slot and repoints the moved node's neighbours and its dictionary entry;
/// - a node is in the LRU list exactly when no load is in flight for it (`load == 0`). Only
///   nodes in the list can be evicted, so a key whose load is in flight is never evicted from
///   under its waiters; ``beginLoad(_:generation:)`` and ``endLoad(_:)`` move a node out of and
///   back into the list.
@usableFromInline
struct KeyedMonoTaskEntryTable<Key: Hashable, Value> {
    /// No slot: the end of the list, or "not linked".
    @usableFromInline static var none: Int32 { -1 }

    @usableFromInline
    struct Node {
        @usableFromInline var key: Key
        /// The cached value; `nil` while a first load runs (or after an expired value was dropped).
        @usableFromInline var value: Value?
        /// When `value` was stored, as an offset from the owner's clock origin.
        @usableFromInline var storedAt: Duration
        /// The generation of the load in flight for this key, `0` for none.
        @usableFromInline var load: UInt64

        @usableFromInline
        init(key: Key, value: Value?, storedAt: Duration, load: UInt64) {
            self.key = key
            self.value = value
            self.storedAt = storedAt
            self.load = load
        }
    }

    /// The list links of the node in the same slot.
    @usableFromInline
    struct Link {
        /// Towards the most recently used node (`none` for the head).
        @usableFromInline var previous: Int32
        /// Towards the least recently used node (`none` for the tail).
        @usableFromInline var next: Int32

        @usableFromInline
        init(previous: Int32, next: Int32) {
            self.previous = previous
            self.next = next
        }
    }

    /// What a removal took out of the table: the node and the dictionary's own copy of the key.
    /// The owner destroys them after releasing its lock (their `deinit`s are user code).
    @usableFromInline
    struct Removed {
        @usableFromInline var node: Node
        @usableFromInline var indexKey: Key
    }

    @usableFromInline var index: [Key: Int32] = [:]
    @usableFromInline var nodes: [Node] = []
    /// `links[i]` belongs to `nodes[i]`.
    @usableFromInline var links: [Link] = []
    /// The cost of each node's value (`costs[i]` for `nodes[i]`, 0 without a value), kept only
    /// when a cost bound is configured; empty otherwise, so the hit path never touches it.
    var costs: [Int] = []
    /// The sum of `costs`.
    private(set) var totalCost = 0
    let tracksCost: Bool
    /// The most recently used node in the list.
    @usableFromInline var head: Int32 = none
    /// The least recently used node in the list: the next to be evicted.
    @usableFromInline var tail: Int32 = none

    @usableFromInline
    init(tracksCost: Bool = false) {
        self.tracksCost = tracksCost
    }

    /// The number of entries, loading or cached.
    @inlinable var count: Int { nodes.count }

    /// The slot of `key`, if present.
    @inlinable
    func find(_ key: Key) -> Int32? {
        index[key]
    }

    /// Moves a node that is in the list to its head (most recently used).
    @inlinable
    mutating func touch(_ slot: Int32) {
        guard slot != head, nodes[Int(slot)].load == 0 else { return }
        unlink(slot)
        linkAtHead(slot)
    }

    /// Adds `key` with a load in flight (not in the list). Returns its slot.
    @usableFromInline
    mutating func insertLoading(_ key: Key, generation: UInt64) -> Int32 {
        precondition(nodes.count < Int(Int32.max), "KeyedMonoTask: more than \(Int32.max) entries")
        let slot = Int32(nodes.count)
        nodes.append(Node(key: key, value: nil, storedAt: .zero, load: generation))
        links.append(Link(previous: Self.none, next: Self.none))
        if tracksCost { costs.append(0) }
        index[key] = slot
        return slot
    }

    /// A load starts for a node that has none: it leaves the list.
    @usableFromInline
    mutating func beginLoad(_ slot: Int32, generation: UInt64) {
        precondition(nodes[Int(slot)].load == 0, "KeyedMonoTask: a second load for one entry")
        unlink(slot)
        nodes[Int(slot)].load = generation
    }

    /// The load of a node ended and the node stays: it enters the list as most recently used.
    @usableFromInline
    mutating func endLoad(_ slot: Int32) {
        nodes[Int(slot)].load = 0
        linkAtHead(slot)
    }

    /// Removes the node in `slot` (from the list too, if it is in it).
    @usableFromInline
    mutating func remove(_ slot: Int32) -> Removed {
        let i = Int(slot)
        if nodes[i].load == 0 { unlink(slot) }
        let indexKey = index.remove(at: index.index(forKey: nodes[i].key)!).key
        let last = nodes.count - 1
        if tracksCost {
            totalCost -= costs[i]
            costs.swapAt(i, last)
            costs.removeLast()
        }
        if i != last {
            nodes.swapAt(i, last)
            links.swapAt(i, last)
            // The node that was last now lives in `slot`: repoint whatever referred to it.
            if nodes[i].load == 0 {
                let previous = links[i].previous
                let next = links[i].next
                if previous == Self.none { head = slot } else { links[Int(previous)].next = slot }
                if next == Self.none { tail = slot } else { links[Int(next)].previous = slot }
            }
            index[nodes[i].key] = slot
        }
        links.removeLast()
        return Removed(node: nodes.removeLast(), indexKey: indexKey)
    }

    /// Records the cost of the value now in `slot` (0 for none). No-op without a cost bound.
    mutating func setCost(_ slot: Int32, _ cost: Int) {
        guard tracksCost else { return }
        totalCost += cost - costs[Int(slot)]
        costs[Int(slot)] = cost
    }

    /// Removes the least recently used node in the list unless it is also the most recently used
    /// one while `keepingHead` is set. `nil` when nothing may be evicted.
    @usableFromInline
    mutating func evictLeastRecentlyUsed(keepingHead: Bool) -> Removed? {
        guard tail != Self.none, !(keepingHead && tail == head) else { return nil }
        return remove(tail)
    }

    /// Empties the table and returns what it held.
    mutating func removeAll() -> (index: [Key: Int32], nodes: [Node]) {
        defer {
            index = [:]
            nodes = []
            links = []
            costs = []
            totalCost = 0
            head = Self.none
            tail = Self.none
        }
        return (index, nodes)
    }

    // MARK: List

    @inlinable
    mutating func unlink(_ slot: Int32) {
        let link = links[Int(slot)]
        if link.previous == Self.none { head = link.next } else { links[Int(link.previous)].next = link.next }
        if link.next == Self.none { tail = link.previous } else { links[Int(link.next)].previous = link.previous }
        links[Int(slot)] = Link(previous: Self.none, next: Self.none)
    }

    @inlinable
    mutating func linkAtHead(_ slot: Int32) {
        links[Int(slot)] = Link(previous: Self.none, next: head)
        if head == Self.none { tail = slot } else { links[Int(head)].previous = slot }
        head = slot
    }

    /// The slots of the list from most to least recently used (tests).
    var recencyOrder: [Int32] {
        var order: [Int32] = []
        var slot = head
        while slot != Self.none {
            order.append(slot)
            slot = links[Int(slot)].next
        }
        return order
    }
}
