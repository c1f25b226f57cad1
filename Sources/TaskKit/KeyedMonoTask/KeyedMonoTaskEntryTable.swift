/// The entries of one shard of a ``KeyedMonoTask``: an open-addressing hash table whose buckets
/// hold the nodes themselves, and an intrusive doubly linked eviction queue threaded through
/// dense *slots* by index.
///
/// Eviction is SIEVE (Zhang et al., "SIEVE is Simpler than LRU", NSDI 2024): the queue keeps the
/// entries in the order they entered it, newest at the head; a hit only sets its node's `read`
/// mark (and only when it is not set already); an eviction moves a *hand* from the tail (oldest)
/// towards the head, clearing each mark it passes, and evicts the first unmarked node, where the
/// hand then stays. So a hit writes no list link and, on a key read before, nothing at all.
/// The promise: **a node is evicted only when the hand finds it unread since the hand last passed
/// it (or since it entered the queue)**; in particular, while some node in the queue is unread,
/// no node read since the previous eviction is evicted.
///
/// - `buckets` is the hash table: linear probing, at most 4/5 full, backward-shift deletion (no
///   tombstones). Nodes move between buckets when a neighbour is removed or the table grows;
///   each node records its bucket in `bucketOf[slot]`.
/// - Slots are dense (`0..<count`): `bucketOf`, `links`, `loads`, `hashes` (and `costs`) are
///   parallel arrays over them. A hit reads only its buckets: what only a miss, a removal or
///   growth needs (the load in flight, the key's hash) lives in the slot arrays, which keeps a
///   node of `Int` keys and values at 32 bytes (48 with both in it: Benchmarks/NOTES.md,
///   issue 35). A lookup compares keys, as `Dictionary` does, not stored hashes. Removing a
///   node moves the last slot into its slot and repoints that slot's bucket, neighbours, node
///   and the hand.
/// - A node is in the queue exactly when no load is in flight for it (`loads[slot] == 0`).
///   Only nodes in the queue can be evicted, so a key whose load is in flight is never evicted
///   from under its waiters; ``beginLoad(_:generation:)`` and ``endLoad(_:)`` move a node out of
///   the queue and back in at its head.
///
/// A pure value type, owned by ``KeyedMonoTaskStateMachine``. Every operation is O(1) (expected,
/// for the hash table; its growth amortised; an eviction's walk amortised over the marks the
/// hits set). Keys are hashed once, on insertion and lookup: removal and growth use the hash
/// stored for the slot.
@usableFromInline
struct KeyedMonoTaskEntryTable<Key: Hashable, Value> {
    /// No slot: the end of the queue, or "not linked".
    @usableFromInline static var none: Int32 { -1 }

    @usableFromInline
    struct Node {
        // The order of the fields is the layout: with `Int` keys and values a node is 32 bytes
        // (`read` sits beside the value's `Optional` tag, `slot` in the padding after them), two
        // to a cache line.
        @usableFromInline var key: Key
        /// The cached value; `nil` while a first load runs (or after an expired value was dropped).
        @usableFromInline var value: Value? = nil
        /// Read since the eviction hand last passed the node (or since it entered the queue).
        @usableFromInline var read = false
        /// The node's slot: its index in `bucketOf`, `links`, `loads`, `hashes` and `costs`.
        @usableFromInline var slot: Int32
        /// When `value` stops being fresh (when it was stored plus its time to live), in
        /// nanoseconds from the owner's clock origin (a whole `Duration` would add 8 bytes to
        /// every node and 128-bit arithmetic to every hit).
        @usableFromInline var expiresAt: Int64 = 0

        /// A node without a value.
        @usableFromInline
        init(key: Key, slot: Int32) {
            self.key = key
            self.slot = slot
        }
    }

    /// The queue links of a slot: `previous` towards the newer nodes (`none` for the head), `next`
    /// towards the older nodes (`none` for the tail).
    @usableFromInline typealias Link = (previous: Int32, next: Int32)

    /// What a removal took out of the table: the node. The owner destroys it after releasing its
    /// lock (the `deinit`s of its key and value are user code).
    @usableFromInline
    struct Removed {
        @usableFromInline var node: Node
        /// The key the index held for the node: the node's own (the table keeps one copy).
        @usableFromInline var indexKey: Key { node.key }

        @usableFromInline
        init(node: Node) { self.node = node }
    }

    /// The hash table: empty, or a power of two of buckets, at most 4/5 of them holding a node.
    @usableFromInline var buckets: [Node?] = []
    /// `bucketOf[slot]` is the bucket holding the node of `slot`.
    @usableFromInline var bucketOf: [Int32] = []
    /// `links[slot]` belongs to the node of `slot`.
    @usableFromInline var links: [Link] = []
    /// `loads[slot]` is the generation of the load in flight for the node of `slot`, `0` for none.
    @usableFromInline var loads: [UInt64] = []
    /// `hashes[slot]` is the low 32 bits of the `hashValue` of the key of `slot`; the node's home
    /// bucket is `hash & (buckets.count - 1)`.
    @usableFromInline var hashes: [UInt32] = []
    /// The cost of each slot's value (0 without a value), kept only when a cost bound is
    /// configured; empty otherwise, so the hit path never touches it.
    @usableFromInline var costs: [Int] = []
    /// The sum of `costs`.
    @usableFromInline private(set) var totalCost = 0
    @usableFromInline let tracksCost: Bool
    /// The whole cache's count and cost, which this table's changes are added to.
    @usableFromInline let occupancy: KeyedMonoTaskOccupancy
    /// The newest slot in the queue.
    @usableFromInline var head: Int32 = none
    /// The oldest slot in the queue.
    @usableFromInline var tail: Int32 = none
    /// Where the next eviction's walk starts (`none`: at the tail). It moves from the tail
    /// towards the head and wraps around.
    @usableFromInline var hand: Int32 = none

    @usableFromInline
    init(tracksCost: Bool = false, occupancy: KeyedMonoTaskOccupancy = KeyedMonoTaskOccupancy()) {
        self.tracksCost = tracksCost
        self.occupancy = occupancy
    }

    /// The number of entries, loading or cached.
    @inlinable var count: Int { bucketOf.count }

    /// The node of `slot`.
    @inlinable
    subscript(slot: Int32) -> Node {
        get { buckets[Int(bucketOf[Int(slot)])]! }
        set { buckets[Int(bucketOf[Int(slot)])] = newValue }
    }

    /// The nodes by slot (tests, and ``removeAll()``).
    var nodes: [Node] {
        bucketOf.map { buckets[Int($0)]! }
    }

    /// The index as a dictionary from key to slot (tests): every node that ``find(_:)`` reaches
    /// through its own slot.
    var index: [Key: Int32] {
        var index: [Key: Int32] = [:]
        for case let node? in buckets where find(node.key) == node.slot {
            index[node.key] = node.slot
        }
        return index
    }

    /// The bucket holding `key`, if present.
    @inlinable
    func findBucket(_ key: Key) -> Int? {
        findBucket(key, hashValue: key.hashValue)
    }

    /// The bucket holding `key`, whose `hashValue` the caller computed, if present.
    @inlinable @inline(__always)
    func findBucket(_ key: Key, hashValue: Int) -> Int? {
        findBucket(key, hash: UInt32(truncatingIfNeeded: hashValue))
    }

    /// The bucket holding `key`, whose hash (the low 32 bits of its `hashValue`) is `hash`, if
    /// present.
    @inlinable @inline(__always)
    func findBucket(_ key: Key, hash: UInt32) -> Int? {
        guard !buckets.isEmpty else { return nil }
        let mask = buckets.count &- 1
        var b = Int(hash) & mask
        while isOccupied(b) {
            if buckets[b]!.key == key { return b }
            b = (b &+ 1) & mask
        }
        return nil
    }

    /// Whether bucket `b` holds a node. Tests `?.slot`, not `!= nil`: comparing the whole
    /// optional node looks up its type's metadata on every probe (54 instructions).
    @inlinable @inline(__always)
    func isOccupied(_ b: Int) -> Bool {
        buckets[b]?.slot != nil
    }

    /// The hash of the key of `slot` (the low 32 bits of its `hashValue`).
    @inlinable
    func hash(of slot: Int32) -> UInt32 {
        hashes[Int(slot)]
    }

    /// The slot of `key`, if present.
    @inlinable
    func find(_ key: Key) -> Int32? {
        findBucket(key).map { buckets[$0]!.slot }
    }

    /// The bucket of `slot`.
    @inlinable
    func bucket(of slot: Int32) -> Int {
        Int(bucketOf[Int(slot)])
    }

    /// Marks the node of `slot` read.
    @inlinable
    mutating func markRead(_ slot: Int32) {
        markRead(bucket: bucket(of: slot))
    }

    /// Marks the node in bucket `b` read. Writes only when the mark is not set: a key read
    /// before leaves its node's cache line clean.
    @inlinable @inline(__always)
    mutating func markRead(bucket b: Int) {
        if !buckets[b]!.read { buckets[b]!.read = true }
    }

    /// Adds `key` with a load in flight (not in the queue). Returns its slot.
    @inlinable
    mutating func insertLoading(_ key: Key, generation: UInt64) -> Int32 {
        insertLoading(key, hash: UInt32(truncatingIfNeeded: key.hashValue), generation: generation)
    }

    /// Adds `key`, whose hash is `hash`, with a load in flight (not in the queue).
    /// Returns its slot.
    @inlinable
    mutating func insertLoading(_ key: Key, hash: UInt32, generation: UInt64) -> Int32 {
        precondition(count < Int(Int32.max) / 2, "KeyedMonoTask: more than \(Int32.max / 2) entries")
        if (count + 1) * 5 > buckets.count * 4 { grow() }
        let slot = Int32(count)
        let b = emptyBucket(from: hash)
        buckets[b] = Node(key: key, slot: slot)
        bucketOf.append(Int32(b))
        links.append(Link(previous: Self.none, next: Self.none))
        loads.append(generation)
        hashes.append(hash)
        if tracksCost { costs.append(0) }
        occupancy.addEntries(1)
        return slot
    }

    /// The generation of the load in flight for the node of `slot`, `0` for none.
    @inlinable
    func load(of slot: Int32) -> UInt64 {
        loads[Int(slot)]
    }

    /// A load starts for a node that has none: it leaves the queue (keeping its mark).
    @inlinable
    mutating func beginLoad(_ slot: Int32, generation: UInt64) {
        precondition(loads[Int(slot)] == 0, "KeyedMonoTask: a second load for one entry")
        unlink(slot)
        loads[Int(slot)] = generation
    }

    /// The load in flight for the node of `slot` is followed by load `generation` at once: the
    /// node stays out of the queue.
    @inlinable
    mutating func replaceLoad(_ slot: Int32, with generation: UInt64) {
        precondition(loads[Int(slot)] != 0, "KeyedMonoTask: a follow-up load without a load")
        loads[Int(slot)] = generation
    }

    /// The load of a node ended and the node stays: it enters the queue at the head, keeping its
    /// mark (a refresh is started by reads).
    @inlinable
    mutating func endLoad(_ slot: Int32) {
        loads[Int(slot)] = 0
        linkAtHead(slot)
    }

    /// Removes the node of `slot` (from the queue too, if it is in it).
    @inlinable
    mutating func remove(_ slot: Int32) -> Removed {
        let i = Int(slot)
        let node = self[slot]
        if loads[i] == 0 { unlink(slot) }
        // `node` keeps the key and value alive: emptying the bucket destroys neither.
        removeBucket(at: bucket(of: slot))
        let last = count - 1
        occupancy.addEntries(-1)
        if tracksCost {
            totalCost -= costs[i]
            occupancy.addCost(-costs[i])
            costs.swapAt(i, last)
            costs.removeLast()
        }
        if i != last {
            bucketOf.swapAt(i, last)
            links.swapAt(i, last)
            loads.swapAt(i, last)
            hashes.swapAt(i, last)
            // The node that was in the last slot is now in `slot`: repoint whatever referred to it.
            let moved = Int(bucketOf[i])
            buckets[moved]!.slot = slot
            if hand == Int32(last) { hand = slot }
            if loads[i] == 0 {
                let previous = links[i].previous
                let next = links[i].next
                if previous == Self.none { head = slot } else { links[Int(previous)].next = slot }
                if next == Self.none { tail = slot } else { links[Int(next)].previous = slot }
            }
        }
        bucketOf.removeLast()
        links.removeLast()
        loads.removeLast()
        hashes.removeLast()
        return Removed(node: node)
    }

    /// Records the cost of the value now in `slot` (0 for none). No-op without a cost bound.
    @inlinable
    mutating func setCost(_ slot: Int32, _ cost: Int) {
        guard tracksCost else { return }
        totalCost += cost - costs[Int(slot)]
        occupancy.addCost(cost - costs[Int(slot)])
        costs[Int(slot)] = cost
    }

    /// Evicts a node (SIEVE, see the type): walks the hand from where it stopped towards the
    /// head, wrapping to the tail, clearing the marks it passes, and removes the first unmarked
    /// node; the hand stays at that node's newer neighbour. With `keepingHead`, the head (the
    /// value that just arrived) is passed over, neither cleared nor evicted. `nil` when nothing
    /// may be evicted.
    @inlinable
    mutating func evict(keepingHead: Bool) -> Removed? {
        guard tail != Self.none, !(keepingHead && tail == head) else { return nil }
        var slot = hand == Self.none ? tail : hand
        while true {
            if !(keepingHead && slot == head) {
                let b = bucket(of: slot)
                if !buckets[b]!.read { break }
                buckets[b]!.read = false
            }
            slot = links[Int(slot)].previous
            if slot == Self.none { slot = tail }
        }
        hand = links[Int(slot)].previous
        return remove(slot)
    }

    /// Empties the table and returns its nodes and, by slot, the loads in flight for them (`0`
    /// for none).
    mutating func removeAll() -> (nodes: [Node], loads: [UInt64]) {
        occupancy.addEntries(-count)
        occupancy.addCost(-totalCost)
        defer {
            buckets = []
            bucketOf = []
            links = []
            loads = []
            hashes = []
            costs = []
            totalCost = 0
            head = Self.none
            tail = Self.none
            hand = Self.none
        }
        return (nodes, loads)
    }

    // MARK: Hash table

    /// The first empty bucket from the home bucket of `hash` (there is one: at most 4/5 are used).
    @inlinable
    func emptyBucket(from hash: UInt32) -> Int {
        let mask = buckets.count - 1
        var b = Int(hash) & mask
        while isOccupied(b) { b = (b + 1) & mask }
        return b
    }

    /// Empties bucket `b` and shifts the nodes after it in its run back, so that every node stays
    /// reachable from its home bucket without crossing an empty bucket. Moved nodes get their
    /// new bucket in `bucketOf`. Destroys no key or value: each moved node is copied first.
    @inlinable
    mutating func removeBucket(at b: Int) {
        let mask = buckets.count - 1
        var hole = b
        var next = (b + 1) & mask
        while let slot = buckets[next]?.slot {
            let home = Int(hashes[Int(slot)]) & mask
            // The node in `next` may move to the hole unless its home lies cyclically in (hole, next].
            if (next - home) & mask >= (next - hole) & mask {
                buckets[hole] = buckets[next]
                bucketOf[Int(buckets[hole]!.slot)] = Int32(hole)
                hole = next
            }
            next = (next + 1) & mask
        }
        buckets[hole] = nil
    }

    /// Doubles the hash table (8 buckets at first) and reinserts the nodes by their slots' hashes.
    @inlinable
    mutating func grow() {
        let old = buckets
        buckets = Array(repeating: nil, count: Swift.max(8, old.count * 2))
        for slot in bucketOf.indices {
            let node = old[Int(bucketOf[slot])]!
            let b = emptyBucket(from: hashes[slot])
            buckets[b] = node
            bucketOf[slot] = Int32(b)
        }
    }

    // MARK: Queue

    @inlinable
    mutating func unlink(_ slot: Int32) {
        let link = links[Int(slot)]
        if hand == slot { hand = link.previous }
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

    /// The slots of the queue from newest to oldest (tests).
    var queueOrder: [Int32] {
        var order: [Int32] = []
        var slot = head
        while slot != Self.none {
            order.append(slot)
            slot = links[Int(slot)].next
        }
        return order
    }
}

extension KeyedMonoTaskEntryTable: Sendable where Key: Sendable, Value: Sendable {}
extension KeyedMonoTaskEntryTable.Node: Sendable where Key: Sendable, Value: Sendable {}
extension KeyedMonoTaskEntryTable.Removed: Sendable where Key: Sendable, Value: Sendable {}
