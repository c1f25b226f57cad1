/// The entries of a ``TaskManagerStateMachine`` by task identifier: array-indexed, no hashing.
///
/// Identifiers are handed out 1, 2, 3… and most tasks end roughly in the order they were
/// added, so the live ones form a sliding window of consecutive identifiers: `slots[i]` holds
/// task `firstID + i` (`nil` once it ended). Lookup is a subtraction and an array index.
///
/// - Ended tasks at the front of the window are skipped (`head` advances); the dead prefix is
///   dropped once it is at least half of the array, so that costs O(1) amortised.
/// - A task that lives much longer than the tasks added after it (never started, held in a
///   batch, waiting on a long delay) would pin the front and let the array grow with every task
///   added since. So when fewer than half the window's slots are live, live entries at the front
///   move to `stragglers`, a dictionary, until the window is dense again. Each entry moves at
///   most once (the window only slides forward), so this too is O(1) amortised, and memory
///   stays proportional to the live tasks.
///
/// An identifier below the window is either a straggler or ended; one at or past the end of the
/// array was never added. Identifiers are never reused, so a stale identifier cannot reach
/// another task's entry.
struct TaskEntryTable<Entry> {
    /// `slots[i]` is the entry of task `firstID + i`; every slot before `head` is `nil`.
    private var slots: [Entry?] = []
    private var firstID = 1
    private var head = 0
    /// Non-`nil` slots.
    private var liveInSlots = 0
    /// Live entries that left the front of the window while it was sparse.
    private var stragglers: [Int: Entry] = [:]

    /// Windows up to this many slots are never considered sparse.
    private static var smallWindow: Int { 32 }

    /// Whether no task is stored.
    var isEmpty: Bool { liveInSlots == 0 && stragglers.isEmpty }

    /// The number of tasks stored.
    var count: Int { liveInSlots + stragglers.count }

    /// The identifier the next insertion gets.
    var nextID: Int { firstID + slots.count }

    /// Stores the entry of a new task and returns its identifier (``nextID``).
    @discardableResult
    mutating func insert(_ entry: Entry) -> Int {
        let id = nextID
        slots.append(entry)
        liveInSlots += 1
        return id
    }

    /// Runs `body` on the entry of task `id` in place and returns its result, or returns `nil`
    /// when there is no such entry.
    ///
    /// A closure rather than a `_modify` accessor: an accessor coroutine that is not inlined
    /// allocates its frame on the heap, once per access (measured: 11 mallocs per task).
    @inline(__always)
    mutating func update<R>(_ id: Int, _ body: (inout Entry) throws -> R) rethrows -> R? {
        let index = id &- firstID
        if index >= head {
            guard index < slots.count, slots[index] != nil else { return nil }
            return try body(&slots[index]!)
        }
        guard !stragglers.isEmpty, stragglers[id] != nil else { return nil }
        return try body(&stragglers[id]!)
    }

    /// The entry of task `id`, if any (a copy).
    subscript(id: Int) -> Entry? {
        let index = id &- firstID
        if index >= head { return index < slots.count ? slots[index] : nil }
        return stragglers.isEmpty ? nil : stragglers[id]
    }

    /// Removes and returns the entry of task `id`, if any.
    @discardableResult
    mutating func remove(_ id: Int) -> Entry? {
        let index = id &- firstID
        guard index >= head else {
            return stragglers.isEmpty ? nil : stragglers.removeValue(forKey: id)
        }
        guard index < slots.count, let entry = slots[index].take() else { return nil }
        liveInSlots -= 1
        if index == head { advanceHead() }
        // Keeps the window dense (or small) after every removal; an insertion cannot thin it.
        if slots.count - head > Self.smallWindow && liveInSlots * 2 < slots.count - head { evictFront() }
        return entry
    }

    /// Skips the ended slots at the front; drops the dead prefix once it is half the array.
    private mutating func advanceHead() {
        while head < slots.count, slots[head] == nil { head += 1 }
        if head == slots.count {
            firstID += head
            head = 0
            slots.removeAll(keepingCapacity: true)
        } else if head > Self.smallWindow && head * 2 >= slots.count {
            firstID += head
            slots.removeFirst(head)
            head = 0
        }
    }

    /// Moves live entries from the front of a sparse window to `stragglers` until it is dense.
    private mutating func evictFront() {
        while head < slots.count && liveInSlots * 2 < slots.count - head {
            if let entry = slots[head].take() {
                stragglers[firstID + head] = entry
                liveInSlots -= 1
            }
            head += 1
        }
        advanceHead()
    }

    /// Checks the invariants (for tests).
    var isConsistent: Bool {
        slots[..<head].allSatisfy { $0 == nil }
            && liveInSlots == slots.lazy.filter { $0 != nil }.count
            && stragglers.keys.allSatisfy { $0 < firstID + head }
    }

    /// How many slots the window spans (for tests).
    var windowSize: Int { slots.count - head }

    /// How many entries are stragglers (for tests).
    var stragglerCount: Int { stragglers.count }
}

extension TaskEntryTable {
    /// The identifiers of every entry, in no particular order.
    var identifiers: [Int] {
        var ids = Array(stragglers.keys)
        for index in head..<slots.count where slots[index] != nil { ids.append(firstID + index) }
        return ids
    }
}
