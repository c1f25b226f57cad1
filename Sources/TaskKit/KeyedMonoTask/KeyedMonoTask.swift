import CoreMetrics
import Logging
import Synchronization

/// ``MonoTask`` for many keys: a bounded, single-flight async loading cache.
///
/// One `KeyedMonoTask` answers requests for the value of any key — a profile per user id, an
/// image per URL, a configuration per tenant — by calling `load` for that key:
/// - **Merging.** Concurrent callers of a key share one load and receive the same result.
///   Keys are independent: a slow or failing key never delays another.
/// - **Caching.** A success is cached for `resultExpireDuration`, counted from its completion;
///   calls inside that window return it without loading. Failures are never cached.
/// - **Stale while revalidate.** For `staleWhileRevalidate` after expiry a caller gets the old
///   value at once and one background refresh runs (one at a time); if it fails, the old value
///   is still served until the window ends, and the next such caller starts another refresh.
/// - **Retrying.** A failed attempt is retried as the ``RetryCount`` says, waiting on the injected
///   clock; waiters only see the final outcome.
/// - **Bounded.** At most `maximumEntries` entries (cached or loading) are held. A key whose load
///   is in flight is never evicted, so loads may take the count above the bound for a while; it
///   holds again as soon as they finish. Which cached value goes is decided by SIEVE, in
///   amortised O(1): values enter a queue in arrival order, a hit marks its value, and an
///   eviction hand moves from the oldest values towards the newest, unmarking marked ones and
///   evicting the first unmarked one. A value is evicted only when the hand finds it unread since
///   the hand last passed it; while any value is unread, none read since the previous eviction
///   goes. On skewed workloads this keeps more hits than least-recently-used eviction (Zipf
///   traces, `Benchmarks/NOTES.md`), and a hit writes no shared list.
/// - **Sharded.** A cache of 256 entries or more is split by key hash into up to 32 shards, each
///   with its own lock and eviction queue, so readers of different keys rarely meet on a lock.
///   The bounds are the whole cache's: a new key evicts from its own shard.
/// - **Cancellation.** A caller whose `Task` is cancelled leaves at once with
///   `CancellationError`; the load goes on for the other callers and its success is cached.
///
/// ```swift
/// let profiles = KeyedMonoTask<UserID, Profile>(
///     maximumEntries: 10_000, resultExpireDuration: .seconds(60), staleWhileRevalidate: .seconds(30)
/// ) { id in
///     try await api.fetchProfile(id)
/// }
/// let ada = try await profiles.value(for: 42)   // loads (once, however many callers ask)
/// let again = try await profiles.value(for: 42) // cached: returns without suspending
/// ```
///
/// `forceUpdate: true` ignores the cached value and never receives the result of a load that
/// began before the call: when a load is in flight, a fresh one follows it (never beside it), and
/// callers arriving meanwhile without `forceUpdate` join the load in flight (or get the cached
/// value, while it is fresh). A failed forced load leaves the cached value in place.
///
/// ``invalidate(_:)`` removes a key: a load in flight for it still delivers to its own callers,
/// but its result is not cached, and callers arriving after the call start a new load.
///
/// Threading: each shard's state lives behind its lock; `load`, callbacks and continuation
/// resumptions never run while one is held, and no call holds two. Each load runs in a `Task` of its own that holds the
/// `KeyedMonoTask` until the load ends, and is never cancelled.
public final class KeyedMonoTask<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline typealias Continuation = MonoContinuation<Value>
    @usableFromInline typealias Waiter = MonoWaiter<Value>

    @usableFromInline typealias Machine = KeyedMonoTaskStateMachine<Key, Value, Waiter>
    @usableFromInline typealias Shards = KeyedMonoTaskShards<Key, Value>

    /// The shards, a power of two of them; a key's shard is chosen by its hash
    /// (``shard(forHashValue:)``).
    @usableFromInline let shards: Shards
    /// `shards.count - 1`.
    @usableFromInline let shardMask: Int
    /// The entry count and total cost of all shards.
    let occupancy: KeyedMonoTaskOccupancy
    @usableFromInline let time: InlineTimeSource
    /// The loader of one key; `nil` with a batch loader.
    @usableFromInline let load: (@Sendable (Key) async throws -> Value)?
    /// The batch loader and its waiting keys; `nil` with a loader of one key.
    @usableFromInline let batcher: KeyedMonoTaskBatcher<Key, Value>?
    /// The loader that reports through a completion (``init(maximumEntries:resultExpireDuration:clock:logger:startLoad:)``);
    /// `nil` otherwise.
    @usableFromInline let completingLoad: CompletingLoad?
    /// Counts the completions of a completing loader (``completingLoad``), each with release
    /// ordering after its value was made; a waiter of such a cache reads it with acquire ordering
    /// once resumed. This states for ThreadSanitizer the order the runtime already gives: a
    /// completion may come from a thread outside Swift concurrency (an event loop) and resume a
    /// waiter that has not yet suspended, a hand-off whose ordering ThreadSanitizer does not see
    /// (it reported the value's fields as raced; Benchmarks/NOTES.md, 2026-11-30).
    @usableFromInline let completions = Atomic<Int>(0)
    /// Starts the load of a key, which reports its outcome by calling the completion exactly once.
    @usableFromInline typealias CompletingLoad =
        @Sendable (Key, _ completion: @escaping @Sendable (Result<Value, any Error>) -> Void) -> Void
    /// The removal listener, if any (see ``deliverRemovals(in:)``).
    @usableFromInline let onRemoval: (@Sendable (Key, Value, KeyedMonoTaskRemovalCause) -> Void)?
    /// The cost of a loaded value, with a cost bound; `nil` without.
    @usableFromInline let cost: (@Sendable (Key, Value) -> Int)?
    /// A loaded value's own time to live; `nil` (every value lives `resultExpireDuration`) without.
    @usableFromInline let expiry: (@Sendable (Key, Value) -> Duration?)?
    /// How long a failed load's error is kept (negative caching); `nil` (never kept) without.
    @usableFromInline let failureExpiry: (@Sendable (Key, any Error) -> Duration?)?
    /// The fail-safe's soft timeout (``FailSafe/softTimeout``); `nil` without.
    let softTimeout: Duration?
    /// A stored value's tags, for `invalidate(tag:)`; `nil` (no tags) without.
    @usableFromInline let tags: (@Sendable (Key, Value) -> Set<String>)?
    /// What the machine needs to store a load's outcome (``storage(of:for:)``).
    @usableFromInline typealias Storage = (cost: Int, expiresIn: Int64?, failureExpiresIn: Int64?, tags: Set<String>?)
    /// The metric objects, with a `metricsLabel`; `nil` (no metric objects) without.
    @usableFromInline let metrics: MonoTaskMetrics?
    /// Receives a debug message per failed load and per retry.
    @usableFromInline let logger: Logger
    /// The tracing seam, with a `tracing:` other than `.none`; `nil` (no span, no context) without.
    let tracer: (any TaskTracer)?
    /// Whether `tracer` is set (what the inlinable load path checks: the tracer's type is not
    /// visible to it).
    @usableFromInline let isTraced: Bool

    /// Creates a cache that loads the value of a key with `load`.
    ///
    /// With `maximumCost` and `cost`, the cache has a second bound: the sum of `cost(key, value)`
    /// over the cached values. When a load finishes and either bound is exceeded, values are
    /// evicted (in the type's order) until both hold again (never the value that just arrived, as
    /// for the entry bound). Values whose load is in flight (a refresh) still count with their
    /// cost and cannot be evicted meanwhile. A value whose cost alone exceeds `maximumCost` is
    /// delivered to its callers but not cached (and the key's older value is dropped). The hit
    /// path is the same with a cost bound as without.
    ///
    /// - Parameters:
    ///   - maximumEntries: The most entries held, cached or loading; must be greater than 0. When
    ///     a new key arrives at the bound, a cached value of its shard is evicted (see the type's
    ///     "Bounded" and "Sharded"). Loads in flight are never evicted and may take the count
    ///     above the bound until they finish.
    ///   - maximumCost: With `cost`, the most total cost of the cached values; must not be
    ///     negative. `nil` (default): no cost bound. Given together with `cost`.
    ///   - resultExpireDuration: How long a success stays fresh, counted from its completion.
    ///     `.zero` (default) caches nothing: concurrent callers still share a load; `nil` keeps a
    ///     value until it is invalidated or evicted. Must not be negative.
    ///   - staleWhileRevalidate: How long after expiry the old value is still served at once while
    ///     one background refresh runs. `.zero` (default): an expired value is never served.
    ///     Must not be negative.
    ///   - refreshAhead: Refresh ahead: a hit on a fresh value past this point of its life (a
    ///     ``RefreshAhead/fraction(_:)`` of its time to live, or an ``RefreshAhead/age(_:)``)
    ///     returns it at once *and* starts one background reload of the key (counted as
    ///     ``KeyedMonoTaskCounters/refreshesAhead``), so a key in use never expires under its
    ///     callers. `nil` (default): none.
    ///   - expiryJitter: Spreads expiries: each stored value's time to live is shortened by a
    ///     random duration between zero and this (never below zero), so that keys loaded together
    ///     (a warm-up, a batch, a restart of many replicas) do not all expire, and reload, in the
    ///     same second. Must not be negative. `.zero` (default): no jitter.
    ///   - failSafe: When a key's value has expired and its reload fails (after its retries), the
    ///     callers get the expired value instead of the error, which is then served as fresh for
    ///     the fail-safe's throttle, up to its maximum staleness past the value's expiry (see
    ///     ``FailSafe``; counted as ``KeyedMonoTaskCounters/failSafeHits``, logged at `warning`).
    ///     `nil` (default): the callers get the error.
    ///   - retry: How failed attempts are retried. Default: no retry.
    ///   - clock: The clock for expiry and the retry backoff. Default: ``CoarseContinuousClock``,
    ///     `ContinuousClock`'s time read on Linux at the kernel's tick (its
    ///     ``CoarseContinuousClock/minimumResolution``, a few milliseconds), which makes a hit
    ///     about twice as fast as a precise read: expiry is exact to within a tick or two. Pass
    ///     `ContinuousClock()` where durations below a few milliseconds must be exact.
    ///   - logger: Receives a debug message per failed load and per retry, with the key as the
    ///     `key` metadata (nothing on the hit path). Default: silent.
    ///   - metricsLabel: With a label, the cache reports through the bootstrapped swift-metrics
    ///     `MetricsSystem` with the dimension `("name", metricsLabel)`: ``MonoTask``'s metric
    ///     names and `taskkit_keyed_evictions` (see <doc:RunningOnAServer>).
    ///     `nil` (default): no metric objects, no cost.
    ///   - tracing: With a tracer (`.distributedTracing` from `TaskKitTracing`), each load (its
    ///     attempts and retries) is one span, `KeyedMonoTask.load`, whose parent is the span active
    ///     where the call that started the load was made, with the attribute
    ///     `taskkit.monotask.callers` (see <doc:RunningOnAServer>). ``TaskTracing/none``
    ///     (default): no span, no cost.
    ///   - expiry: The time to live of a loaded value, decided by the value (a token's lifetime, an
    ///     HTTP response's `Cache-Control: max-age`): it replaces `resultExpireDuration` for that
    ///     value; `nil` from it means `resultExpireDuration`, and a negative duration counts as
    ///     zero. `staleWhileRevalidate` still follows the expiry. Called once per successful
    ///     load, in the load's `Task`, never under a lock. `nil` (default): every value lives
    ///     `resultExpireDuration`.
    ///   - failureExpiry: Negative caching: how long a failed load's error is kept as the key's
    ///     answer (a "not found" for a minute, say); callers within that time get the error at
    ///     once, without a load (counted as ``KeyedMonoTaskCounters/negativeHits``), and the first
    ///     after it loads again. `nil` from it (or zero or less) keeps nothing; a
    ///     `CancellationError` is never kept. A success, ``invalidate(_:)`` and a forced call end
    ///     it. Called once per failed load (after its retries), never under a lock. `nil`
    ///     (default): no failure is kept.
    ///   - tags: The tags of a loaded value, computed from its key and the value ("user:42",
    ///     "catalog"), for ``invalidate(tag:)``. Called once per value stored (a load's, a
    ///     batch's, a ``put(_:for:)``), never under a lock. `nil` (default): no tags.
    ///   - cost: With `maximumCost`, the cost of a loaded value, for example its size in bytes;
    ///     must not be negative. Called once per successful load, in the load's `Task`, never
    ///     under a lock. `nil` (default): no cost bound.
    ///   - onRemoval: The removal listener: called with the key, the value and the
    ///     ``KeyedMonoTaskRemovalCause`` each time a cached value leaves the cache (expired,
    ///     evicted for size or cost, invalidated, replaced), never for a value that was not
    ///     cached (a load's result not kept, a superseded load's). Called outside every lock, on
    ///     the thread of the call whose operation removed the value (or of one that removed
    ///     another value of the same shard meanwhile): the removals of a key never concurrently,
    ///     and in the order they happened. Keep it short; it may call the cache. `nil` (default):
    ///     none, and no cost.
    ///   - load: Loads the value of a key. Runs in a `Task` of its own, never under a lock, at
    ///     most once at a time per key (except after ``invalidate(_:)``, see there).
    public convenience init(
        maximumEntries: Int,
        maximumCost: Int? = nil,
        resultExpireDuration: Duration? = .zero,
        staleWhileRevalidate: Duration = .zero,
        refreshAhead: RefreshAhead? = nil,
        expiryJitter: Duration = .zero,
        failSafe: FailSafe? = nil,
        retry: RetryCount = .never,
        clock: some Clock<Duration> = CoarseContinuousClock(),
        logger: Logger = .silent(label: "TaskKit.KeyedMonoTask"),
        metricsLabel: String? = nil,
        tracing: TaskTracing = .none,
        expiry: (@Sendable (Key, Value) -> Duration?)? = nil,
        failureExpiry: (@Sendable (Key, any Error) -> Duration?)? = nil,
        tags: (@Sendable (Key, Value) -> Set<String>)? = nil,
        cost: (@Sendable (Key, Value) -> Int)? = nil,
        onRemoval: (@Sendable (Key, Value, KeyedMonoTaskRemovalCause) -> Void)? = nil,
        load: @escaping @Sendable (Key) async throws -> Value
    ) {
        self.init(
            entries: maximumEntries, costBound: maximumCost, resultExpireDuration: resultExpireDuration,
            staleWhileRevalidate: staleWhileRevalidate, refreshAhead: refreshAhead, expiryJitter: expiryJitter,
            failSafe: failSafe, retry: retry,
            clock: clock, expiry: expiry,
            failureExpiry: failureExpiry, tags: tags, costOf: cost, onRemoval: onRemoval,
            logger: logger, metricsLabel: metricsLabel, tracing: tracing, loader: .single(load)
        )
    }

    /// Creates a cache whose loads report their outcome through a completion rather than by
    /// returning it, for a loader inside this package that must be able to answer its callers
    /// before its own work ends: TaskKitPostgres ends a load with a statement's timeout while the
    /// statement, which postgres-nio cannot abandon, runs on in the load's task. Such a load
    /// answers its callers from where it completes, with no task of the cache's between them.
    ///
    /// `startLoad` is called outside every lock, on the thread of the call that started the load;
    /// it must call the completion exactly once, from anywhere. No retry, tracing or metrics.
    package convenience init(
        maximumEntries: Int,
        resultExpireDuration: Duration?,
        clock: some Clock<Duration>,
        logger: Logger,
        startLoad: @escaping @Sendable (Key, _ completion: @escaping @Sendable (Result<Value, any Error>) -> Void) -> Void
    ) {
        self.init(
            entries: maximumEntries, costBound: nil, resultExpireDuration: resultExpireDuration,
            staleWhileRevalidate: .zero, refreshAhead: nil, expiryJitter: .zero, failSafe: nil, retry: .never,
            clock: clock, expiry: nil, failureExpiry: nil, tags: nil, costOf: nil, onRemoval: nil,
            logger: logger, metricsLabel: nil, tracing: .none, loader: .completing(startLoad)
        )
    }

    /// How a cache loads: one key per call, or batches, or one key reported through a completion.
    enum Loader {
        case single(@Sendable (Key) async throws -> Value)
        case batch(KeyedMonoTaskBatcher<Key, Value>)
        case completing(CompletingLoad)
    }

    init(
        entries maximumEntries: Int,
        costBound maximumCost: Int?,
        resultExpireDuration: Duration?,
        staleWhileRevalidate: Duration,
        refreshAhead: RefreshAhead?,
        expiryJitter: Duration,
        failSafe: FailSafe?,
        retry: RetryCount,
        clock: some Clock<Duration>,
        expiry: (@Sendable (Key, Value) -> Duration?)?,
        failureExpiry: (@Sendable (Key, any Error) -> Duration?)?,
        tags: (@Sendable (Key, Value) -> Set<String>)?,
        costOf cost: (@Sendable (Key, Value) -> Int)?,
        onRemoval: (@Sendable (Key, Value, KeyedMonoTaskRemovalCause) -> Void)?,
        logger: Logger,
        metricsLabel: String?,
        tracing: TaskTracing,
        loader: Loader
    ) {
        precondition(maximumEntries > 0, "KeyedMonoTask: maximumEntries must be > 0, got \(maximumEntries)")
        precondition(
            (maximumCost == nil) == (cost == nil),
            "KeyedMonoTask: maximumCost and cost must be given together (maximumCost: \(String(describing: maximumCost)), cost: \(cost == nil ? "nil" : "given"))"
        )
        if let maximumCost {
            precondition(maximumCost >= 0, "KeyedMonoTask: maximumCost must be >= 0, got \(maximumCost)")
        }
        if let resultExpireDuration {
            precondition(
                resultExpireDuration >= .zero,
                "KeyedMonoTask: resultExpireDuration must be >= .zero (or nil), got \(resultExpireDuration)"
            )
        }
        precondition(
            staleWhileRevalidate >= .zero,
            "KeyedMonoTask: staleWhileRevalidate must be >= .zero, got \(staleWhileRevalidate)"
        )
        precondition(expiryJitter >= .zero, "KeyedMonoTask: expiryJitter must be >= .zero, got \(expiryJitter)")
        _ = retry.maximumRetries  // rejects a negative count with its own message
        // With a batch loader the batch is retried as a whole (by the owner), never one key.
        let keyRetry: RetryCount
        switch loader {
        case .single(let load):
            keyRetry = retry
            self.load = load
            self.batcher = nil
            self.completingLoad = nil
        case .batch(let batcher):
            keyRetry = .never
            self.load = nil
            self.batcher = batcher
            self.completingLoad = nil
        case .completing(let startLoad):
            keyRetry = .never
            self.load = nil
            self.batcher = nil
            self.completingLoad = startLoad
        }
        let configuration = Machine.Configuration(
            maximumEntries: maximumEntries, timeToLive: resultExpireDuration,
            staleWhileRevalidate: staleWhileRevalidate, retry: keyRetry, maximumCost: maximumCost,
            failSafe: failSafe, expiryJitter: expiryJitter, refreshAhead: refreshAhead,
            notifiesRemovals: onRemoval != nil
        )
        self.onRemoval = onRemoval
        self.logger = logger
        let shardCount = Self.shardCount(maximumEntries: maximumEntries)
        let occupancy = KeyedMonoTaskOccupancy()
        self.occupancy = occupancy
        self.shards = Shards(count: shardCount) { _ in
            Machine(configuration: configuration, occupancy: occupancy)
        }
        self.shardMask = shardCount - 1
        self.time = InlineTimeSource(clock)
        self.cost = cost
        self.expiry = expiry
        self.failureExpiry = failureExpiry
        self.softTimeout = failSafe?.softTimeout
        self.tags = tags
        self.metrics = metricsLabel.map { MonoTaskMetrics(label: $0, keyed: true) }
        self.tracer = tracing.tracer
        self.isTraced = tracing.tracer != nil
    }

    // MARK: Shards

    /// How many shards a cache of `maximumEntries` has: a power of two, at most 32, with room
    /// for at least 128 entries each (one below 256 entries).
    static func shardCount(maximumEntries: Int) -> Int {
        var count = 1
        while count < 32, maximumEntries / (count * 2) >= 128 { count *= 2 }
        return count
    }

    /// The shard of a key whose `hashValue` is `hashValue`: the top bits of a Fibonacci hash,
    /// which depend on every bit of the hash, so that the keys of a shard do not share the low
    /// bits its own table indexes with.
    @inlinable
    func shard(forHashValue hashValue: Int) -> Int {
        Self.shardIndex(hashValue: hashValue, mask: shardMask)
    }

    /// The index of the shard of a key whose `hashValue` is `hashValue`, with `mask` the shard
    /// count less one.
    @inlinable
    static func shardIndex(hashValue: Int, mask: Int) -> Int {
        let mixed = UInt64(truncatingIfNeeded: hashValue) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: mixed >> 59) & mask
    }

    /// The shard of `key`.
    @inlinable
    func shard(for key: Key) -> Int {
        shard(forHashValue: key.hashValue)
    }

    // MARK: Values

    /// The value of `key`: cached, or from the load in flight, or from a new load.
    ///
    /// A cache hit returns without suspending and without allocating. Otherwise the caller waits
    /// for the load's final outcome (after retries). If the calling `Task` is cancelled while
    /// waiting, this throws `CancellationError` at once; the load goes on for the other callers
    /// and its success is still cached.
    ///
    /// Runs on the caller's executor (`nonisolated(nonsending)`): no executor hop on entry.
    ///
    /// - Parameters:
    ///   - key: The key to load.
    ///   - forceUpdate: Ignore the cached value and never receive the result of a load that began
    ///     before this call (a fresh load follows one in flight).
    /// - Throws: The load's final error unchanged, or `CancellationError`.
    @inlinable
    nonisolated(nonsending)
    public func value(for key: Key, forceUpdate: Bool = false) async throws -> Value {
        switch lookUp(key, forceUpdate: forceUpdate) {
        case .hit(let value):
            return value
        case .miss(let id, let hashValue, let now):
            return try await wait(key: key, hashValue: hashValue, id: id, forceUpdate: forceUpdate, now: now).get()
        }
    }

    /// What ``value(for:forceUpdate:)`` found for `key`.
    @usableFromInline
    enum Lookup {
        /// A usable cached value, already counted, its refresh (if due) started.
        case hit(Value)
        /// No usable value: register a waiter with this identifier (`hashValue`: the key's; `now`:
        /// the time the lookup read, which the registration uses too).
        case miss(Machine.WaiterID, hashValue: Int, now: Int64)
    }

    /// The synchronous part of ``value(for:forceUpdate:)``: a hit (counted, with its refresh
    /// started) or the identifier a waiter registers with.
    ///
    /// A function of its own, not part of the async `value(for:)`: written inside it, the metrics
    /// call made `value(for:)` too large for the optimiser to inline into its caller, and every
    /// hit paid for an async call frame (`swift_task_alloc`/`dealloc`, +18 ns); split this way,
    /// both are inlined again (Benchmarks/NOTES.md, issue 22).
    @inlinable
    func lookUp(_ key: Key, forceUpdate: Bool) -> Lookup {
        let now = time.nowNanoseconds()
        let hashValue = key.hashValue
        // The shards are inline in one buffer held by a `let` (`KeyedMonoTaskShards`): nothing
        // is retained for the critical section.
        let fast = shards.withLock(Self.shardIndex(hashValue: hashValue, mask: shardMask)) {
            $0.fastPath(key: key, hashValue: hashValue, forceUpdate: forceUpdate, now: now)
        }
        switch fast {
        case .hit(let value, let refresh):
            metrics?.recordHit()
            if let refresh { startLoad(refresh, in: shard(forHashValue: hashValue)) }
            return .hit(value)
        case .miss(let id):
            return .miss(id, hashValue: hashValue, now: now)
        }
    }

    /// The value of `key`, delivered to `then`: cached, or from the load in flight, or from a new
    /// load. Same rules as ``value(for:forceUpdate:)``; there is no caller cancellation.
    ///
    /// - Parameters:
    ///   - key: The key to load.
    ///   - forceUpdate: See ``value(for:forceUpdate:)``.
    ///   - then: Called exactly once: on the calling thread, before this method returns, for a
    ///     cache hit; otherwise on the thread of the load that completes, after the async callers
    ///     of that load were resumed, in registration order with the other callbacks (or, when
    ///     a fail-safe's soft timeout answers first, on the thread of its timer).
    public func value(
        for key: Key, forceUpdate: Bool = false, then: @escaping @Sendable (Result<Value, any Error>) -> Void
    ) {
        let now = time.nowNanoseconds()
        let state = shard(for: key)
        let hashValue = key.hashValue
        let (id, action) = shards.withLock(state) { machine in
            let id = machine.makeWaiterID()
            return (
                id,
                machine.request(
                    key: key, hashValue: hashValue, waiter: .callback(then), id: id, forceUpdate: forceUpdate, now: now
                )
            )
        }
        if let metrics { metrics.record(action) }
        if action.notifiesRemovals { deliverRemovals(in: state) }
        switch action {
        case .deliverCached(let value, let refresh):
            if let refresh { startLoad(refresh, in: state) }
            then(.success(value))
        case .deliverFailure(let error):
            then(.failure(error))
        case .enqueued(let startLoad, _, let softTimeout):
            if let startLoad { self.startLoad(startLoad, in: state) }
            if softTimeout { armSoftTimeout(key: key, hashValue: hashValue, id: id) }
        case .callerCancelled:
            preconditionFailure("a callback caller is never reported as cancelled")
        }
    }

    /// The values of several keys, loaded in parallel.
    ///
    /// Cached keys are answered at once; for the others this joins loads already in flight and
    /// starts at most one load per missing key, all running in parallel. Duplicate keys are asked
    /// for once. If the calling `Task` is cancelled, the keys still waiting get
    /// `.failure(CancellationError())`; their loads go on.
    ///
    /// - Parameter keys: The keys to look up.
    /// - Returns: One result per distinct key: the value, or the load's final error.
    @inlinable
    public func values(for keys: some Sequence<Key> & Sendable) async -> [Key: Result<Value, any Error>] {
        if let batcher { return await batchedValues(for: keys, batcher: batcher) }
        var results: [Key: Result<Value, any Error>] = [:]
        var unique: [Key] = []
        for key in keys where results.updateValue(.failure(CancellationError()), forKey: key) == nil {
            unique.append(key)
        }
        let now = time.nowNanoseconds()
        var hits: [(Key, Value)] = []
        var misses: [(Key, Machine.WaiterID)] = []
        var refreshes: [(Machine.StartLoad, Int)] = []
        for key in unique {
            let hashValue = key.hashValue
            let state = shard(forHashValue: hashValue)
            switch shards.withLock(state, { $0.fastPath(key: key, hashValue: hashValue, forceUpdate: false, now: now) }) {
            case .hit(let value, let refresh):
                hits.append((key, value))
                if let refresh { refreshes.append((refresh, state)) }
            case .miss(let id):
                misses.append((key, id))
            }
        }
        if let metrics, !hits.isEmpty { metrics.recordHits(hits.count) }
        for (refresh, state) in refreshes { startLoad(refresh, in: state) }
        for (key, value) in hits { results[key] = .success(value) }
        guard !misses.isEmpty else { return results }
        return await withTaskGroup(of: (Key, Result<Value, any Error>).self) { group in
            for (key, id) in misses {
                group.addTask {
                    (key, await self.wait(key: key, hashValue: key.hashValue, id: id, forceUpdate: false, now: now))
                }
            }
            for await (key, result) in group { results[key] = result }
            return results
        }
    }

    /// The value of `key` that ``value(for:forceUpdate:)`` would return without waiting (fresh,
    /// or stale within the stale-while-revalidate window), or `nil`. Never loads, never waits,
    /// and changes nothing (no recency update, no refresh, no counters).
    public func cachedValue(for key: Key) -> Value? {
        let now = time.nowNanoseconds()
        return shards.withLock(shard(for: key)) { $0.cachedValue(for: key, now: now) }
    }

    // MARK: Cache control

    /// Removes `key`'s entry. A load in flight for it goes on and delivers to the callers that
    /// are waiting for it, but its result is not cached; callers arriving after this call start
    /// a new load (so for a while two loads of the key may run). Callers that asked with
    /// `forceUpdate` for a load after the one in flight get that new load at once.
    public func invalidate(_ key: Key) {
        let state = shard(for: key)
        let (startLoad, released) = shards.withLock(state) { $0.invalidate(key) }
        withExtendedLifetime(released) {}
        account(released, in: state)
        if let startLoad { self.startLoad(startLoad, in: state) }
    }

    /// Removes the entry of every key for which `shouldRemove` returns `true` (see
    /// ``invalidate(_:)``): "everything of user 42" in one call. The keys are those held when
    /// the call visits their shard (an entry, loading or cached, or a kept failure), one shard
    /// at a time; `shouldRemove` is called for each outside every lock, on the calling thread.
    public func invalidate(where shouldRemove: (Key) throws -> Bool) rethrows {
        for state in 0..<shards.count {
            let keys = shards.withLock(state) { $0.keys }
            for key in keys where try shouldRemove(key) {
                invalidate(key)
            }
        }
    }

    /// Removes the entry of every key whose cached value has `tag` (from the cache's `tags`), as
    /// ``invalidate(_:)`` does: "everything of user 42" when values are tagged `"user:42"`. The
    /// keys are those tagged when the call visits their shard, one shard at a time.
    public func invalidate(tag: String) {
        for state in 0..<shards.count {
            let keys = shards.withLock(state) { $0.keys(taggedWith: tag) }
            for key in keys { invalidate(key) }
        }
    }

    /// Puts `value` as `key`'s value, as if a load had just returned it (a write-through after
    /// an update, or a DataLoader's `prime`): it replaces a cached value; a load of the key in
    /// flight still delivers its result to the callers waiting for it, but does not store it over
    /// this one. `cost`, `expiry` and `tags`, if given, are asked about `value` (on the calling thread,
    /// before any lock); a kept failure and a fail-safe of the key end. Nothing is cached when a
    /// loaded value would not be (a `resultExpireDuration` of `.zero` and no `expiry`, a cost
    /// above `maximumCost`). Makes room as a new key does.
    public func put(_ value: Value, for key: Key) {
        let stored = storage(of: .success(value), for: key)
        let now = time.nowNanoseconds()
        let state = shard(for: key)
        let released = shards.withLock(state) {
            $0.put(key: key, value: value, cost: stored.cost, expiresIn: stored.expiresIn, tags: stored.tags, now: now)
        }
        withExtendedLifetime(released) {}
        account(released, in: state)
        if released.overBound { restoreBounds(besides: state) }
    }

    /// Removes every entry; loads in flight behave as for ``invalidate(_:)``. Shard by shard: a
    /// key added to a shard after this call emptied it stays.
    public func invalidateAll() {
        for state in 0..<shards.count {
            let (startLoads, released) = shards.withLock(state) { $0.invalidateAll() }
            withExtendedLifetime(released) {}
            account(released, in: state)
            for startLoad in startLoads { self.startLoad(startLoad, in: state) }
        }
    }

    // MARK: State

    /// The number of entries held, loading or cached.
    public var count: Int {
        occupancy.entryCount
    }

    /// The counters: each shard's read under its lock, added up. Every counter only grows, so
    /// with calls in progress each is somewhere between its values at the start and the end of
    /// the read; with none, the snapshot is exact.
    @inlinable
    public var counters: KeyedMonoTaskCounters {
        // Inlinable, and an index loop: code specialised for the key and value types, where a
        // generic `reduce` looked up type metadata on every call (a caller polling the counters
        // paid 600 instructions a read).
        var sum = KeyedMonoTaskCounters()
        for index in 0..<shards.count { sum.add(shards.withLock(index) { $0.counters }) }
        if batcher != nil { addBatchCounts(to: &sum) }
        return sum
    }

    /// Adds the batch loader's counts to `counters`.
    @usableFromInline
    func addBatchCounts(to counters: inout KeyedMonoTaskCounters) {
        guard let batcher else { return }
        let counts = batcher.counts
        counters.batches += counts.batches
        counters.batchedKeys += counts.keys
        counters.retries += counts.retries
    }

    /// Runs `body` on each shard's state machine under its lock, in shard order (tests).
    func inspect<R: Sendable>(_ body: (Machine) -> R) -> [R] {
        (0..<shards.count).map { index in shards.withLock(index) { body($0) } }
    }

    // MARK: Waiting

    @inlinable
    nonisolated(nonsending)
    func wait(
        key: Key, hashValue: Int, id: Machine.WaiterID, forceUpdate: Bool, now: Int64
    ) async -> Result<Value, any Error> {
        let result = await withTaskCancellationHandler {
            await withMonoContinuation { (continuation: Continuation) in
                // An unchecked continuation (release builds) is sound here: it is either resumed
                // right below, or stored in the state machine, whose rules hand every stored
                // waiter back exactly once (delivery by its load, or cancelWaiter).
                let state = shard(forHashValue: hashValue)
                let action = shards.withLock(state) { machine in
                    machine.request(
                        key: key, hashValue: hashValue, waiter: .async(continuation), id: id, forceUpdate: forceUpdate,
                        now: now, callerCancelled: Task.isCancelled
                    )
                }
                if let metrics { metrics.record(action) }
                let notifies = action.notifiesRemovals
                defer { if notifies { deliverRemovals(in: state) } }
                switch consume action {
                case .deliverCached(let value, let refresh):
                    continuation.resume(returning: .success(value))
                    if let refresh { startLoad(refresh, in: state) }
                case .deliverFailure(let error):
                    continuation.resume(returning: .failure(error))
                case .enqueued(let startLoad, _, let softTimeout):
                    if let startLoad { self.startLoad(startLoad, in: state) }
                    if softTimeout { armSoftTimeout(key: key, hashValue: hashValue, id: id) }
                case .callerCancelled:
                    continuation.resume(returning: .failure(CancellationError()))
                }
            }
        } onCancel: {
            // Runs after the task's cancelled flag is set. If the waiter is not stored yet, the
            // registration above reads that flag under the same lock and fails the caller itself.
            let waiter = shards.withLock(shard(forHashValue: hashValue)) { $0.cancelWaiter(key: key, id: id) }
            if case .async(let continuation)? = waiter {
                continuation.resume(returning: .failure(CancellationError()))
            }
        }
        if completingLoad != nil { _ = completions.load(ordering: .acquiring) }
        return result
    }

    // MARK: Loading

    /// Starts the `Task` of a load that `state` (the key's shard) returned. It holds `self`
    /// strongly until the load ends.
    ///
    /// - Parameter byCaller: Whether a call of the user's started the load (its span is then the
    ///   parent of the load's); `false` for the follow-up loads a load starts.
    ///
    /// Inlinable, as is all it calls to start, run and finish a load (or a batch): specialised
    /// in the caller's module, the load path makes no generic metadata lookups (they were most
    /// of a miss's cost, Benchmarks/NOTES.md, issue 36). Only the traced paths are out of line.
    @inlinable
    func startLoad(_ start: Machine.StartLoad, in state: Int, byCaller: Bool = true) {
        if start.refreshesAhead, let metrics { metrics.recordRefreshAhead() }
        if let batcher {
            perform(batcher.enqueue(.init(start: start, shard: state)), batcher: batcher)
            return
        }
        guard !isTraced else { return startTracedLoad(start, in: state, byCaller: byCaller) }
        let key = start.key
        let generation = start.generation
        if let completingLoad {
            let started: Int64 = metrics == nil ? 0 : time.nowNanoseconds()
            completingLoad(key) { result in
                self.completions.add(1, ordering: .releasing)
                let retry = self.attemptEnded(
                    key: key, generation: generation, in: state, result: result, started: started, span: UntracedRun())
                assert(retry == nil, "a completing load is never retried")
            }
            return
        }
        // A throwing operation that throws nothing: a `Task<Void, Never>` wraps its operation in
        // a thunk, one more allocation per load (as `TaskManager`'s jobs, see `publishExecution`).
        Task.detached { () async throws -> Void in
            await self.run(key: key, generation: generation, in: state, span: UntracedRun())
        }
    }

    /// ``startLoad(_:in:byCaller:)`` with a tracer: the load runs in a span.
    @usableFromInline
    func startTracedLoad(_ start: Machine.StartLoad, in state: Int, byCaller: Bool) {
        guard let tracer else { return }
        let key = start.key
        let generation = start.generation
        let parent = byCaller ? tracer.currentContext() : nil
        Task.detached { () async throws -> Void in
            await tracer.withInternalSpan("KeyedMonoTask.load", parent: parent) { span in
                await self.run(key: key, generation: generation, in: state, span: TracedRun(span: span))
            }
        }
    }

    /// Runs the attempts of a load of the shard `state`, reporting retries and the outcome to
    /// `span`.
    @inlinable
    func run(
        key: Key, generation: Machine.Generation, in state: Int, span: some RunSpan
    ) async {
        let started: Int64 = metrics == nil ? 0 : time.nowNanoseconds()
        while true {
            let result: Result<Value, any Error>
            do {
                // `run` is only started with a loader of one key, where `load` is set.
                result = .success(try await load!(key))
            } catch {
                result = .failure(error)
            }
            guard let delay = attemptEnded(
                key: key, generation: generation, in: state, result: result, started: started, span: span)
            else { return }
            if delay > .zero {
                // This task is never cancelled, so the sleep ends at its deadline.
                try? await time.sleep(for: delay)
            }
            shards.withLock(state) { $0.retryDue(generation: generation) }
        }
    }

    /// Reports the outcome of an attempt of a load of the shard `state` to the machine: returns
    /// the delay before the next attempt, or `nil` when the load ended (its callers answered).
    @inlinable
    func attemptEnded(
        key: Key, generation: Machine.Generation, in state: Int, result: Result<Value, any Error>,
        started: Int64, span: some RunSpan
    ) -> Duration? {
        let stored = self.storage(of: result, for: key)
        let now = time.nowNanoseconds()
        let action = shards.withLock(state) { [stored] in
            $0.attemptFinished(
                generation: generation, result: result, cost: stored.cost, expiresIn: stored.expiresIn,
                failureExpiresIn: stored.failureExpiresIn, tags: stored.tags, now: now
            )
        }
        switch consume action {
        case .retry(let delay):
            span.retried()
            logger.debug("KeyedMonoTask: load retries after \(delay)", metadata: ["key": "\(key)"])
            return delay
        case .finish(let waiters, let delivered, let next, let released):
            if let metrics { metrics.recordRun(duration: .nanoseconds(now &- started), result: result) }
            if case .failure(let error) = result {
                loadFailed(key, error, answered: delivered, callers: waiters.count)
            }
            span.finished(delivered, callers: waiters.count)
            finish(waiters: waiters, result: delivered, next: next, released: released, in: state)
            return nil
        }
    }

    /// The end of a load of the shard `state`: destroys what it released, restores the bounds,
    /// delivers `result` to `waiters` and starts the follow-up load `next`.
    @inlinable
    func finish(
        waiters: [Machine.WaiterEntry], result: Result<Value, any Error>, next: Machine.StartLoad?,
        released: Machine.Released,
        in state: Int
    ) {
        withExtendedLifetime(released) {}
        account(released, in: state)
        if released.overBound { restoreBounds(besides: state) }
        deliver(result, to: waiters)
        if let next { startLoad(next, in: state, byCaller: false) }
    }

    /// Logs the final failure `error` of `key`'s load, which `callers` waited for and got
    /// `answered` (the expired value, when a fail-safe answered instead: also counted).
    @usableFromInline
    func loadFailed(_ key: Key, _ error: any Error, answered: Result<Value, any Error>, callers: Int) {
        guard case .success = answered else {
            logger.debug("KeyedMonoTask: load failed: \(error)", metadata: ["key": "\(key)", "callers": "\(callers)"])
            return
        }
        metrics?.recordFailSafeHits(callers)
        logger.warning(
            "KeyedMonoTask: load failed; the expired value answers instead (fail-safe): \(error)",
            metadata: ["key": "\(key)", "callers": "\(callers)"]
        )
    }

    /// Answers waiter `id` of `key` with the expired value the fail-safe keeps if its reload has
    /// not answered within the soft timeout (the machine said one applies when it registered).
    /// A detached task sleeps on the clock, then asks the key's shard; a waiter the load (or the
    /// caller's cancellation) answered first is no longer there, so it is answered once.
    @usableFromInline
    func armSoftTimeout(key: Key, hashValue: Int, id: Machine.WaiterID) {
        guard let softTimeout else { return }
        Task.detached { () async throws -> Void in
            try? await self.time.sleep(for: softTimeout)
            let now = self.time.nowNanoseconds()
            guard
                let (waiter, value) = self.shards.withLock(self.shard(forHashValue: hashValue), {
                    $0.softTimeoutEnded(key: key, id: id, now: now)
                })
            else { return }
            self.metrics?.recordSoftTimeout()
            self.logger.debug("KeyedMonoTask: soft timeout, the expired value answers", metadata: ["key": "\(key)"])
            switch waiter {
            case .async(let continuation): continuation.resume(returning: .success(value))
            case .callback(let callback): callback(.success(value))
            }
        }
    }

    /// What the machine needs to store `result` for `key`: a success's cost with a cost bound
    /// (checked not negative; `0` without one) and its own time to live when `expiry` gives one;
    /// how long to keep a failure when `failureExpiry` says (never a `CancellationError`);
    /// durations in nanoseconds. Never called under a lock: `cost`, `expiry` and
    /// `failureExpiry` are user code.
    @usableFromInline
    func storage(of result: Result<Value, any Error>, for key: Key) -> Storage {
        var valueCost = 0
        if let cost, case .success(let value) = result {
            valueCost = cost(key, value)
            precondition(valueCost >= 0, "KeyedMonoTask: cost(_:_:) must return >= 0, got \(valueCost)")
        }
        let kept = keptFor(
            result, expiry: expiry.map { expiry in { expiry(key, $0) } },
            failureExpiry: failureExpiry.map { failureExpiry in { failureExpiry(key, $0) } }
        )
        var valueTags: Set<String>?
        if let tags, case .success(let value) = result { valueTags = tags(key, value) }
        return (valueCost, kept.value?.keyedMonoTaskNanoseconds, kept.failure?.keyedMonoTaskNanoseconds, valueTags)
    }

    /// The cache is above a bound and the shard `finished` had nothing more to evict: evicts
    /// from the other shards, one after the other, until the bounds hold.
    @inlinable
    func restoreBounds(besides finished: Int) {
        var index = Int.random(in: 0..<shards.count)  // no shard always the one to give way
        for _ in 0..<shards.count {
            index = (index + 1) & shardMask
            guard index != finished else { continue }
            let released = shards.withLock(index) { $0.evictWhileOverBound() }
            withExtendedLifetime(released) {}
            account(released, in: index)
            if !released.overBound { return }
        }
    }

    /// After a critical section of shard `state` that released `released` (and destroyed it):
    /// counts its removals and, when it was told to, delivers the shard's queued removals.
    @inlinable
    func account(_ released: borrowing Machine.Released, in state: Int) {
        if let metrics { metrics.recordRemovals(released.causes) }
        if released.notifies { deliverRemovals(in: state) }
    }

    /// Delivers the removals queued in shard `state` to the listener, outside its lock, until
    /// none are left: this owner was told to (``KeyedMonoTaskStateMachine/Released/notifies``),
    /// and until it finds the queue empty no other does, so the removals of a key (one shard's)
    /// are delivered one at a time, in the order they happened. Those queued meanwhile, by this
    /// thread's listener calls or by other threads, are delivered in this loop.
    @usableFromInline
    func deliverRemovals(in state: Int) {
        guard let onRemoval else { return }
        while let removals = shards.withLock(state, { $0.takeRemovals() }) {
            for removal in removals { onRemoval(removal.key, removal.value, removal.cause) }
        }
    }

    /// Resumes the async waiters with `result`, then calls the callbacks, each in registration
    /// order.
    @inlinable
    func deliver(_ result: Result<Value, any Error>, to waiters: [Machine.WaiterEntry]) {
        for callback in waiters.resumingContinuations(with: result, waiter: { $0.waiter }) { callback(result) }
    }
}

extension MonoTaskMetrics {
    /// Counts a request by the action its registration returned, and the evictions it caused.
    @usableFromInline
    func record<Key, Value, Waiter>(_ action: KeyedMonoTaskStateMachine<Key, Value, Waiter>.RequestAction) {
        switch action {
        case .deliverCached: recordHit()
        case .deliverFailure: recordNegativeHit()
        case .enqueued(let startLoad, let released, _):
            recordMiss(started: startLoad != nil)
            recordRemovals(released.causes)
        case .callerCancelled: break
        }
    }

    /// Counts the values a critical section removed, by cause, and its evictions.
    @usableFromInline
    func recordRemovals(_ counts: KeyedMonoTaskRemovalCounts) {
        let evicted = counts.evictedForSize + counts.evictedForCost
        if evicted > 0, let evictions { evictions.increment(by: evicted) }
        // Most critical sections remove nothing: no array of counts is built for them.
        guard let removals, evicted + counts.expired + counts.invalidated + counts.replaced > 0 else { return }
        let byCause = [counts.expired, counts.evictedForSize, counts.evictedForCost, counts.invalidated, counts.replaced]
        for (counter, count) in zip(removals, byCause) where count > 0 { counter.increment(by: count) }
    }
}
