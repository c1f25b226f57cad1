/// A read-only snapshot of what a ``KeyedMonoTask`` has done since it was created.
///
/// ``KeyedMonoTask/counters`` reads each shard's counters under its lock and adds them up; with no
/// call in progress every field describes the same instant. The counters only grow.
public struct KeyedMonoTaskCounters: Sendable, Hashable, CustomStringConvertible {
    /// Calls answered from the cache without waiting: fresh values and stale ones served within
    /// the stale-while-revalidate window (``staleHits`` counts those again).
    public internal(set) var hits: Int = 0
    /// Hits that served a stale value (within the stale-while-revalidate window).
    public internal(set) var staleHits: Int = 0
    /// Calls answered at once with a failure the cache kept (negative caching, `failureExpiry`);
    /// not counted in ``hits``.
    public internal(set) var negativeHits: Int = 0
    /// Callers of a failed reload answered with the expired value instead of the error (a
    /// ``FailSafe``); also counted where they arrived (``misses`` or ``merges``).
    public internal(set) var failSafeHits: Int = 0
    /// Callers answered with an expired value because its reload took longer than the
    /// fail-safe's soft timeout (``FailSafe/softTimeout``); also counted where they arrived
    /// (``misses`` or ``merges``).
    public internal(set) var softTimeouts: Int = 0
    /// Hits on a fresh value past its refresh point (``RefreshAhead``) that started its
    /// background reload; also counted in ``hits`` and ``loads``.
    public internal(set) var refreshesAhead: Int = 0
    /// Calls that found no usable value (or were forced) and started a load.
    public internal(set) var misses: Int = 0
    /// Calls that joined a load in flight, or the load requested to follow it, instead of
    /// starting one.
    public internal(set) var merges: Int = 0
    /// Loads started: for misses, `forceUpdate` follow-ups and background refreshes. Retries
    /// of a load are not counted here (see ``retries``).
    public internal(set) var loads: Int = 0
    /// Retry attempts made after failed attempts.
    public internal(set) var retries: Int = 0
    /// Loads whose final attempt failed.
    public internal(set) var failures: Int = 0
    /// Entries removed to keep the cache within its bounds, `maximumEntries` or `maximumCost`
    /// (``KeyedMonoTaskRemovalCause/evictedForSize`` and ``KeyedMonoTaskRemovalCause/evictedForCost``).
    public internal(set) var evictions: Int = 0
    /// The part of ``evictions`` made to keep the cache within `maximumCost`.
    public internal(set) var costEvictions: Int = 0
    /// Entries removed by `invalidate(_:)`, `invalidate(where:)`, `invalidate(tag:)` and
    /// `invalidateAll()`.
    public internal(set) var invalidations: Int = 0
    /// Values dropped because a caller found them expired (``KeyedMonoTaskRemovalCause/expired``).
    public internal(set) var expirations: Int = 0
    /// Values replaced by a newer value of their key: a load's, a batch's or a put's
    /// (``KeyedMonoTaskRemovalCause/replaced``).
    public internal(set) var replacements: Int = 0
    /// Async callers that left early because their own `Task` was cancelled.
    public internal(set) var callerCancellations: Int = 0
    /// Calls of the batch loader (with one; retries of a batch are counted in ``retries``).
    public internal(set) var batches: Int = 0
    /// The keys those calls carried: `batchedKeys / batches` is the mean batch size.
    public internal(set) var batchedKeys: Int = 0

    // The machine's inlinable paths count through these: a setter of a `public internal(set)`
    // property cannot be called from inlinable code, a `@usableFromInline` method can (and is
    // cheap: the type is not generic).

    @usableFromInline
    mutating func recordHit() { hits += 1 }

    @usableFromInline
    mutating func recordMerge() { merges += 1 }

    @usableFromInline mutating func recordMiss() { misses += 1 }
    @usableFromInline mutating func recordLoad() { loads += 1 }
    @usableFromInline mutating func recordRetry() { retries += 1 }
    @usableFromInline mutating func recordFailure() { failures += 1 }
    @usableFromInline mutating func recordEviction() { evictions += 1 }
    @usableFromInline mutating func recordCostEviction() { costEvictions += 1 }
    @usableFromInline mutating func recordExpiration() { expirations += 1 }
    @usableFromInline mutating func recordReplacement() { replacements += 1 }

    @usableFromInline
    mutating func recordStaleHit() {
        hits += 1
        staleHits += 1
    }

    /// Adds `other`'s counts to these (one shard's to the sum).
    @usableFromInline
    mutating func add(_ other: Self) {
        hits += other.hits
        staleHits += other.staleHits
        negativeHits += other.negativeHits
        failSafeHits += other.failSafeHits
        softTimeouts += other.softTimeouts
        refreshesAhead += other.refreshesAhead
        misses += other.misses
        merges += other.merges
        loads += other.loads
        retries += other.retries
        failures += other.failures
        evictions += other.evictions
        costEvictions += other.costEvictions
        invalidations += other.invalidations
        expirations += other.expirations
        replacements += other.replacements
        callerCancellations += other.callerCancellations
        batches += other.batches
        batchedKeys += other.batchedKeys
    }

    /// An all-zero snapshot: the library makes the counters, a caller reads them.
    @usableFromInline init() {}

    /// A one-line summary, for logs.
    public var description: String {
        "hits=\(hits) staleHits=\(staleHits) negativeHits=\(negativeHits) failSafeHits=\(failSafeHits) softTimeouts=\(softTimeouts) refreshesAhead=\(refreshesAhead) misses=\(misses) merges=\(merges) loads=\(loads) "
            + "retries=\(retries) failures=\(failures) evictions=\(evictions) costEvictions=\(costEvictions) "
            + "invalidations=\(invalidations) expirations=\(expirations) replacements=\(replacements) callerCancellations=\(callerCancellations) "
            + "batches=\(batches) batchedKeys=\(batchedKeys)"
    }
}
