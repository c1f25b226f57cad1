/// Why a value left a ``KeyedMonoTask``: what its removal listener (`onRemoval`) is told with
/// the key and the value, and what the counters and the `taskkit_keyed_removals` metric count.
///
/// A struct of constants rather than an enum, so that a later cause does not break a `switch`
/// over these (match with `case .expired:` and a `default`).
public struct KeyedMonoTaskRemovalCause: Sendable, Hashable, CustomStringConvertible {
    @usableFromInline
    enum Cause: UInt8, Sendable {
        case expired, evictedForSize, evictedForCost, invalidated, replaced
    }

    @usableFromInline let cause: Cause

    @usableFromInline
    init(_ cause: Cause) { self.cause = cause }

    /// A caller found the value past its time to live (and its stale window, and a fail-safe's
    /// bound), and it was dropped for a reload. An expired value that no caller asks for stays
    /// until a bound evicts it (then counted as evicted) or it is invalidated.
    public static var expired: Self { Self(.expired) }
    /// Evicted to keep the cache within `maximumEntries`.
    public static var evictedForSize: Self { Self(.evictedForSize) }
    /// Evicted to keep the cache within `maximumCost`.
    public static var evictedForCost: Self { Self(.evictedForCost) }
    /// Removed by ``KeyedMonoTask/invalidate(_:)``, `invalidate(where:)`, `invalidate(tag:)` or
    /// ``KeyedMonoTask/invalidateAll()``.
    public static var invalidated: Self { Self(.invalidated) }
    /// Replaced by a newer value of its key: a load's, a batch's, or one put with
    /// ``KeyedMonoTask/put(_:for:)``.
    public static var replaced: Self { Self(.replaced) }

    /// `expired`, `evicted_size`, `evicted_cost`, `invalidated` or `replaced`: the value of the
    /// `cause` dimension of `taskkit_keyed_removals`.
    public var description: String {
        switch cause {
        case .expired: "expired"
        case .evictedForSize: "evicted_size"
        case .evictedForCost: "evicted_cost"
        case .invalidated: "invalidated"
        case .replaced: "replaced"
        }
    }
}

/// How many values left a shard in one critical section, by cause (evictions counted by entry).
@usableFromInline
struct KeyedMonoTaskRemovalCounts: Sendable {
    @usableFromInline var expired = 0
    @usableFromInline var evictedForSize = 0
    @usableFromInline var evictedForCost = 0
    @usableFromInline var invalidated = 0
    @usableFromInline var replaced = 0

    @usableFromInline init() {}
}
