import Synchronization

/// The entry count and total cost of a whole ``KeyedMonoTask``, shared by its shards, so that
/// `maximumEntries` and `maximumCost` bound the cache, not each shard.
///
/// The one state the shards share. A shard's table writes it under that shard's lock when a node
/// is inserted or removed, or a value's cost changes — never on a hit — and the shard's machine
/// reads it to decide whether to evict. Shards change it concurrently, so a bound check may miss
/// another shard's change of the same moment: new keys arriving at once in several shards can
/// take the count above the bound, as loads in flight may anyway, and it is restored when loads
/// finish (the owner then evicts from other shards if the finishing one has nothing to evict).
/// Relaxed ordering suffices: the counts decide how much to evict, and each shard's lock orders
/// its own changes.
@usableFromInline
final class KeyedMonoTaskOccupancy: Sendable {
    /// Entries held by every shard, loading or cached.
    @usableFromInline let entries = Atomic<Int>(0)
    /// The sum of the cached values' costs in every shard (0 without a cost bound).
    @usableFromInline let cost = Atomic<Int>(0)

    @usableFromInline init() {}

    @inlinable var entryCount: Int { entries.load(ordering: .relaxed) }
    @inlinable var totalCost: Int { cost.load(ordering: .relaxed) }

    // Wrapping: one `lock xadd`. The checked `add` is a compare-and-swap loop (to trap on
    // overflow), which retried under contention when two cores inserted keys at once; neither
    // sum comes near overflowing (entries are bounded by `Int32`, costs by `maximumCost` plus
    // one value's).

    /// Adds `delta` (negative: removes) to the entry count.
    @inlinable func addEntries(_ delta: Int) { entries.wrappingAdd(delta, ordering: .relaxed) }

    /// Adds `delta` (negative: removes) to the total cost.
    @inlinable func addCost(_ delta: Int) { cost.wrappingAdd(delta, ordering: .relaxed) }
}
