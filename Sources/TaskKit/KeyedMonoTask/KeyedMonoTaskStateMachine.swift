/// The rules of ``KeyedMonoTask`` as a pure value type: no locks, no threads, no clocks, no user
/// code (beyond the key's `hash(into:)` and `==`).
///
/// Every method takes the current time as an offset in nanoseconds (`Int64`) from the owner's
/// clock origin (``KeyedMonoTaskStateMachine/nanoseconds(_:)`` converts a `Duration`),
/// mutates the state and returns an *action* for the owner to perform after releasing its lock:
/// which waiters to deliver to, which load to start, and what was removed (keys and values whose
/// `deinit`s must not run under the lock).
///
/// Vocabulary:
/// - An *entry* is a key in the ``KeyedMonoTaskEntryTable``: a cached value, a load in flight,
///   or both (a refresh or a forced load while an older value is still served).
/// - A *load* is one logical execution for a key: the first attempt plus its retries, with a
///   unique *generation*, which names its slot in `loadSlots`; an entry names its load.
///   `invalidate` *detaches* a load: the entry goes, the load runs on and its result goes to
///   its own waiters only.
///
/// Each stored waiter is handed back exactly once: by ``attemptFinished(generation:result:now:)``
/// (delivery) or by ``cancelWaiter(key:id:)``.
@usableFromInline
struct KeyedMonoTaskStateMachine<Key: Hashable, Value, Waiter> {
    @usableFromInline typealias Generation = UInt64
    @usableFromInline typealias WaiterID = UInt64
    @usableFromInline typealias Table = KeyedMonoTaskEntryTable<Key, Value>

    /// The validated configuration.
    @usableFromInline
    struct Configuration {
        /// The bound on the whole cache's entries (``KeyedMonoTaskOccupancy/entryCount``),
        /// restored as loads finish.
        @usableFromInline var maximumEntries: Int
        /// How long a success is fresh after its completion, in nanoseconds.
        @usableFromInline var timeToLive: Int64
        /// The stale-while-revalidate window: how long past its expiry a value is served while
        /// it reloads, in nanoseconds (0 with a `nil` time to live: nothing expires).
        @usableFromInline var staleWindow: Int64
        /// The retry policy of each load.
        @usableFromInline var retry: RetryCount
        /// The bound on the sum of the whole cache's cached values' costs, `nil` for none.
        @usableFromInline var maximumCost: Int?
        /// The randomness of the retry delays' jitter.
        @usableFromInline var jitter: RetryJitter
        /// An expired value answers for a failed reload (``FailSafe``), in nanoseconds; `nil`
        /// for never.
        @usableFromInline var failSafe: (maximumStaleness: Int64, throttle: Int64, softTimeout: Bool)?
        /// The most a stored value's time to live is shortened at random, in nanoseconds (0:
        /// never), so that values stored together do not expire together.
        @usableFromInline var expiryJitter: Int64
        /// When a hit starts a refresh of a fresh value (``RefreshAhead``); `nil` for never.
        @usableFromInline var refreshAhead: RefreshAhead?
        /// A removal listener is set: each removed value is queued in ``removals``.
        @usableFromInline var notifiesRemovals: Bool

        @usableFromInline
        init(
            maximumEntries: Int, timeToLive: Duration?, staleWhileRevalidate: Duration, retry: RetryCount,
            maximumCost: Int? = nil, jitter: RetryJitter = .system, failSafe: FailSafe? = nil,
            expiryJitter: Duration = .zero, refreshAhead: RefreshAhead? = nil, notifiesRemovals: Bool = false
        ) {
            self.refreshAhead = refreshAhead
            self.notifiesRemovals = notifiesRemovals
            self.maximumEntries = maximumEntries
            if let timeToLive {
                self.timeToLive = KeyedMonoTaskStateMachine.nanoseconds(timeToLive)
                self.staleWindow =
                    KeyedMonoTaskStateMachine.nanoseconds(timeToLive + staleWhileRevalidate) &- self.timeToLive
            } else {
                self.timeToLive = Self.forever
                self.staleWindow = 0
            }
            self.retry = retry
            self.maximumCost = maximumCost
            self.jitter = jitter
            self.expiryJitter = KeyedMonoTaskStateMachine.nanoseconds(expiryJitter)
            self.failSafe = failSafe.map {
                (
                    KeyedMonoTaskStateMachine.nanoseconds($0.maximumStaleness),
                    KeyedMonoTaskStateMachine.nanoseconds($0.throttle), $0.softTimeout != nil
                )
            }
        }

        /// How far into a `lifetime` (nanoseconds) a value is due for a refresh ahead; `nil` for
        /// never (no ``RefreshAhead``, or the value expires first).
        @usableFromInline
        func refreshDue(within lifetime: Int64) -> Int64? {
            switch refreshAhead?.point {
            case nil:
                return nil
            case .fraction(let fraction)?:
                guard lifetime < Self.forever else { return nil }
                let due = Int64(Double(lifetime) * fraction)
                return due < lifetime ? due : nil
            case .age(let age)?:
                let due = KeyedMonoTaskStateMachine.nanoseconds(age)
                return due < lifetime ? due : nil
            }
        }

        /// The time to live of `nil` (kept until invalidated or evicted): about 73 years in
        /// nanoseconds, an age that no offset read from a clock since the cache's creation reaches.
        @usableFromInline static var forever: Int64 { Duration.keyedMonoTaskForever }

        /// `timeToLive` plus the stale-while-revalidate window: the age at which a value with the
        /// configured time to live is unusable, in nanoseconds.
        @inlinable var usableFor: Int64 { timeToLive &+ staleWindow }

        /// Whether a success is kept at all (`false` when both durations are zero).
        @inlinable var keepsResults: Bool { usableFor > 0 }

        /// The time to live of a success: `expiresIn` (the value's own, from the cache's
        /// `expiry`, clamped to 0 … ``forever``) or the configured one; `nil` when the value is
        /// not kept at all (it is not usable for any time).
        @inlinable
        func lifetime(expiresIn: Int64?) -> Int64? {
            guard let expiresIn else { return keepsResults ? timeToLive : nil }
            let lifetime = min(max(expiresIn, 0), Self.forever)
            return lifetime > 0 || staleWindow > 0 ? lifetime : nil
        }
    }

    @usableFromInline typealias WaiterEntry = IdentifiedWaiter<Waiter>

    @usableFromInline
    struct Load {
        @usableFromInline var key: Key
        /// The low 32 bits of the key's `hashValue` (``KeyedMonoTaskEntryTable/hash(of:)``): the
        /// load finds its entry without hashing the key again.
        @usableFromInline var hash: UInt32
        /// Waiting for the backoff delay before the next attempt.
        @usableFromInline var inBackoff = false
        /// Its waiters, its follow-up's, and its retries (the rules ``MonoTask`` shares).
        @usableFromInline var flight: SingleFlight<Waiter>
        /// `false` once `invalidate` detached it: its result is delivered but not stored.
        @usableFromInline var attached = true
        /// `false` once `put` replaced the entry's value while it ran: its result is delivered
        /// to its waiters, not stored over the value put (nor kept as a failure).
        @usableFromInline var stores = true

        @usableFromInline
        init(key: Key, hash: UInt32, waiters: [WaiterEntry]) {
            self.key = key
            self.hash = hash
            self.flight = SingleFlight(waiters: waiters)
        }
    }

    /// Start the load `generation` for `key`.
    @usableFromInline
    struct StartLoad {
        @usableFromInline var key: Key
        @usableFromInline var generation: Generation
        /// Another load of the key may be in flight: the shard holds loads that `invalidate`
        /// detached. Only then can a batch hold two loads of one key.
        @usableFromInline var keyMayRepeat: Bool
        /// A hit on a value past its refresh point began it (``RefreshAhead``), for the metrics.
        @usableFromInline var refreshesAhead = false

        @usableFromInline
        init(key: Key, generation: Generation, keyMayRepeat: Bool = false) {
            self.key = key
            self.generation = generation
            self.keyMayRepeat = keyMayRepeat
        }
    }

    /// Keys and values taken out of the state, to be destroyed after the lock is released.
    @usableFromInline
    struct Released {
        @usableFromInline var removed: [Table.Removed] = []
        /// The values removed, by cause (for the metrics).
        @usableFromInline var causes = RemovalCounts()
        /// How many of `removed` were evicted by a bound.
        @usableFromInline var evictions: Int { causes.evictedForSize + causes.evictedForCost }
        /// Removals were queued for the listener and nobody was delivering them: the owner
        /// delivers them now, after the lock (``takeRemovals()``), and so does nobody else meanwhile.
        @usableFromInline var notifies = false
        /// The cache is still above a bound and this shard had nothing more to evict: the owner
        /// evicts from the other shards.
        @usableFromInline var overBound = false
        @usableFromInline var values: [Value] = []
        /// The key of the load that finished (the machine's copy).
        @usableFromInline var key: Key?
        @usableFromInline var table: [Table.Node]?

        @usableFromInline init() {}
    }

    @usableFromInline typealias RemovalCounts = KeyedMonoTaskRemovalCounts

    /// A value that left, for the removal listener.
    @usableFromInline
    struct Removal {
        @usableFromInline var key: Key
        @usableFromInline var value: Value
        @usableFromInline var cause: KeyedMonoTaskRemovalCause

        @usableFromInline
        init(key: Key, value: Value, cause: KeyedMonoTaskRemovalCause) {
            self.key = key
            self.value = value
            self.cause = cause
        }
    }

    @usableFromInline
    enum Freshness {
        /// Fresh, past its refresh point (``RefreshAhead``): served, and reloaded in the
        /// background.
        case due
        case fresh, stale, unusable
    }

    /// A failed load's error kept until `expiresAt`, and the order it was kept in.
    @usableFromInline
    struct KeptFailure {
        @usableFromInline var error: any Error
        @usableFromInline var expiresAt: Int64
        @usableFromInline var sequence: UInt64
    }

    // MARK: Actions

    @usableFromInline
    enum FastPathAction {
        /// A usable cached value; start the load if non-`nil` (a stale-while-revalidate refresh).
        case hit(Value, refresh: StartLoad?)
        /// No usable value: register a waiter with this identifier.
        case miss(WaiterID)
    }

    @usableFromInline
    enum RequestAction {
        /// A usable cached value for the caller, who was not stored; maybe start a refresh.
        case deliverCached(Value, refresh: StartLoad?)
        /// A kept failure of the key (negative caching) for the caller, who was not stored.
        case deliverFailure(any Error)
        /// The waiter was stored; start the load if non-`nil`; destroy `released` after unlocking.
        /// `softTimeout`: an expired value the fail-safe keeps is at hand, so the caller may get it
        /// when its soft timeout ends first (``softTimeoutEnded(key:id:now:)``).
        case enqueued(startLoad: StartLoad?, released: Released, softTimeout: Bool = false)
        /// The caller's task was already cancelled: not stored; fail it with `CancellationError`.
        case callerCancelled

        /// Removals for the listener were queued and this action's owner is to deliver them
        /// (``Released/notifies``).
        @inlinable
        var notifiesRemovals: Bool {
            guard case .enqueued(_, let released, _) = self else { return false }
            return released.notifies
        }
    }

    @usableFromInline
    enum AttemptFinishedAction {
        /// Sleep for the delay, then call ``retryDue(generation:)`` and attempt again.
        case retry(after: Duration)
        /// Deliver `result` to `waiters` (registration order), then start `next` if non-`nil`.
        case finish(waiters: [WaiterEntry], result: Result<Value, any Error>, next: StartLoad?, released: Released)
    }

    // MARK: State

    @usableFromInline let configuration: Configuration
    @usableFromInline var table: Table
    /// Failures kept for a while (negative caching: the cache's `failureExpiry` gave them a
    /// time to live), by key, with when they expire (nanoseconds). Read only where a caller
    /// finds no usable value, so the hit path never looks here; at most `maximumEntries` of them
    /// per shard (the oldest goes first).
    @usableFromInline var failures: [Key: KeptFailure] = [:]
    /// The keys whose value answers for failed reloads (a ``FailSafe``), with when that value
    /// first expired (nanoseconds), from which its staleness is counted. A key leaves with a
    /// success, its removal or its invalidation; empty without a fail-safe.
    @usableFromInline var failSafeSince: [Key: Int64] = [:]
    /// The tags of the keys whose cached value has some (the cache's `tags` gave them), for
    /// `invalidate(tag:)`. A key leaves with its value; empty without tags.
    @usableFromInline var tagged: [Key: Set<String>] = [:]
    /// With refresh ahead, the expiry (nanoseconds) of each value whose node holds its refresh
    /// point in `expiresAt` instead: a hit reads this only once the refresh point has passed.
    /// A key leaves when its value is replaced without a refresh point, or removed.
    @usableFromInline var expiries: [Key: Int64] = [:]
    /// With a removal listener, the removals not yet delivered, in order.
    @usableFromInline var removals: [Removal] = []
    /// An owner is delivering ``removals`` (one at a time, so a key's are never delivered
    /// concurrently or out of order).
    @usableFromInline var deliveringRemovals = false
    /// The loads in flight, by slot (`nil`: a free slot). A load's generation holds its slot in
    /// its low 32 bits and a sequence number (1 to 2^31 - 1) above them, so that it is never 0:
    /// finding a load costs an index, not a hash. Written only by the machine's own methods.
    @usableFromInline var loadSlots: [Load?] = []
    /// The free slots of `loadSlots`, the most recently freed last.
    @usableFromInline var freeLoadSlots: [Int32] = []
    /// Loads in flight, attached or detached.
    @usableFromInline private(set) var loadsInFlight = 0
    /// Loads in `loadSlots` that `invalidate` detached from their entry.
    @usableFromInline private(set) var detachedLoads = 0
    /// Loads begun: the sequence numbers of the generations.
    @usableFromInline private(set) var loadsBegun: UInt64 = 0
    /// Failures kept so far: the order of ``failures``.
    @usableFromInline var failuresKept: UInt64 = 0
    @usableFromInline var lastWaiterID: WaiterID = 0
    @usableFromInline var counters = KeyedMonoTaskCounters()

    /// A machine for one shard of a cache whose shards share `occupancy` (a cache of its own by
    /// default).
    @usableFromInline
    init(configuration: Configuration, occupancy: KeyedMonoTaskOccupancy = KeyedMonoTaskOccupancy()) {
        self.configuration = configuration
        self.table = Table(tracksCost: configuration.maximumCost != nil, occupancy: occupancy)
    }

    /// Whether the whole cache is above one of its bounds.
    @inlinable
    func isOverBound() -> Bool {
        table.occupancy.entryCount > configuration.maximumEntries
            || configuration.maximumCost.map { table.occupancy.totalCost > $0 } == true
    }

    /// Whether the whole cache is at its entry bound (a new key needs room).
    @inlinable
    func isFull() -> Bool {
        table.occupancy.entryCount >= configuration.maximumEntries
    }

    // MARK: Queries

    /// Entries held by this shard, loading or cached.
    @usableFromInline var count: Int { table.count }

    /// The slot in `loadSlots` of load `generation`.
    @inlinable
    static func slot(_ generation: Generation) -> Int {
        Int(truncatingIfNeeded: UInt32(truncatingIfNeeded: generation))
    }

    /// `duration` in whole nanoseconds, clamped to ±``Configuration/forever``.
    static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.keyedMonoTaskNanoseconds
    }

    /// How usable a value that expires at `expiresAt` is at `now`: fresh before, then stale for
    /// the stale-while-revalidate window, then unusable.
    @inlinable
    func freshness(expiresAt: Int64, now: Int64) -> Freshness {
        let overdue = now &- expiresAt
        if overdue < 0 { return .fresh }
        if overdue < configuration.staleWindow { return .stale }
        return .unusable
    }

    /// How usable the value of the node in `bucket` is at `now`: with refresh ahead, the node
    /// holds its refresh point, after which ``expiries`` tells whether it is due or expired.
    @inlinable @inline(__always)
    func freshness(ofBucket bucket: Int, now: Int64) -> Freshness {
        let point = table.buckets[bucket]!.expiresAt
        if now &- point < 0 { return .fresh }
        if !expiries.isEmpty, let expiresAt = expiries[table.buckets[bucket]!.key] {
            return now &- expiresAt < 0 ? .due : freshness(expiresAt: expiresAt, now: now)
        }
        return freshness(expiresAt: point, now: now)
    }

    /// When the value of the node in `bucket` stops being fresh (with refresh ahead, its node
    /// may hold its refresh point instead).
    @inlinable
    func expiry(ofBucket bucket: Int) -> Int64 {
        guard !expiries.isEmpty, let expiresAt = expiries[table.buckets[bucket]!.key] else {
            return table.buckets[bucket]!.expiresAt
        }
        return expiresAt
    }

    /// The node in `bucket` holds `key`'s new value, which lives `lifetime` (before the jitter)
    /// from `now`; with refresh ahead, the node holds its refresh point and ``expiries`` its expiry.
    @inlinable
    mutating func setLifetime(_ lifetime: Int64, bucket: Int, key: Key, now: Int64) {
        let lifetime = configuration.expiryJitter > 0 ? jittered(lifetime) : lifetime
        if configuration.refreshAhead != nil, let due = configuration.refreshDue(within: lifetime) {
            table.buckets[bucket]!.expiresAt = now &+ due
            expiries[key] = now &+ lifetime
        } else {
            table.buckets[bucket]!.expiresAt = now &+ lifetime
            if !expiries.isEmpty { expiries[key] = nil }
        }
    }

    /// The value a caller would get without waiting (fresh, or stale within the window). Changes
    /// nothing: no recency, no counters, no refresh.
    @usableFromInline
    func cachedValue(for key: Key, now: Int64) -> Value? {
        guard let bucket = table.findBucket(key), let value = table.buckets[bucket]!.value else { return nil }
        switch freshness(ofBucket: bucket, now: now) {
        case .fresh, .due, .stale: return value
        case .unusable: return nil
        }
    }

    // MARK: Callers

    /// The lock-held fast path of an async caller: a cache hit, or a waiter identifier to register.
    /// `hashValue` is `key.hashValue`, which the owner computed to choose the shard.
    @inlinable
    mutating func fastPath(key: Key, hashValue: Int, forceUpdate: Bool, now: Int64) -> FastPathAction {
        if !forceUpdate, let bucket = table.findBucket(key, hashValue: hashValue),
            let hit = cacheHit(bucket: bucket, now: now)
        {
            return .hit(hit.value, refresh: hit.refresh)
        }
        lastWaiterID &+= 1
        return .miss(lastWaiterID)
    }

    /// A new waiter identifier (for a callback caller; async callers get theirs from ``fastPath``).
    @usableFromInline
    mutating func makeWaiterID() -> WaiterID {
        lastWaiterID &+= 1
        return lastWaiterID
    }

    /// A caller asks for the value of `key`, whose `hashValue` the owner computed.
    ///
    /// Inlinable, so that the common cases (a usable value, a load in flight to join) run
    /// specialised in the caller's module, without generic metadata lookups; the two cases that
    /// start a load are out of line.
    @inlinable
    mutating func request(
        key: Key, hashValue: Int, waiter: Waiter, id: WaiterID, forceUpdate: Bool, now: Int64,
        callerCancelled: Bool = false
    ) -> RequestAction {
        guard let bucket = table.findBucket(key, hashValue: hashValue) else {
            if callerCancelled { return .callerCancelled }
            if !failures.isEmpty, !forceUpdate, let error = keptFailure(key, now: now) { return .deliverFailure(error) }
            return loadNewEntry(
                key: key, hash: UInt32(truncatingIfNeeded: hashValue), waiter: WaiterEntry(id: id, waiter: waiter)
            )
        }
        if !forceUpdate, let hit = cacheHit(bucket: bucket, now: now) {
            return .deliverCached(hit.value, refresh: hit.refresh)
        }
        let slot = table.buckets[bucket]!.slot
        if callerCancelled { return .callerCancelled }
        let running = table.load(of: slot)
        if running == 0, !failures.isEmpty, !forceUpdate, let error = keptFailure(key, now: now) {
            return .deliverFailure(error)
        }
        if running != 0 {
            // Join the load in flight, or (forced) the load that will follow it.
            loadSlots[Self.slot(running)]!.flight.join(WaiterEntry(id: id, waiter: waiter), forced: forceUpdate)
            counters.recordMerge()
            return .enqueued(
                startLoad: nil, released: Released(),
                softTimeout: !forceUpdate && configuration.failSafe?.softTimeout == true && table.buckets[bucket]!.value != nil
            )
        }
        return reload(slot: slot, key: key, waiter: WaiterEntry(id: id, waiter: waiter), forced: forceUpdate, now: now)
    }

    /// ``request(key:waiter:id:forceUpdate:now:callerCancelled:)`` for a key without an entry:
    /// makes room (only entries without a load in flight can go), then starts its load.
    @inlinable
    mutating func loadNewEntry(key: Key, hash: UInt32, waiter: WaiterEntry) -> RequestAction {
        var released = Released()
        makeRoom(&released)
        let generation = beginLoad(key: key, hash: hash, waiters: [waiter])
        _ = table.insertLoading(key, hash: hash, generation: generation)
        counters.recordMiss()
        return .enqueued(startLoad: startLoad(key: key, generation: generation), released: released)
    }

    /// ``request(key:waiter:id:forceUpdate:now:callerCancelled:)`` for an idle entry whose value
    /// is unusable, or a forced call: loads now. A forced load keeps a usable value for the
    /// callers that are not forced; an unusable one is dropped.
    @inlinable
    mutating func reload(slot: Int32, key: Key, waiter: WaiterEntry, forced: Bool, now: Int64) -> RequestAction {
        var released = Released()
        let bucket = Int(table.bucketOf[Int(slot)])
        if let value = table.buckets[bucket]!.value, freshness(ofBucket: bucket, now: now) == .unusable,
            configuration.failSafe == nil || !keepsForFailSafe(key, expiredAt: expiry(ofBucket: bucket), now: now)
        {
            noteRemoval(key, value, .expired, &released)
            released.values.append(value)
            table[slot].value = nil
            table.setCost(slot, 0)
            if !expiries.isEmpty { expiries[key] = nil }
        }
        let generation = beginLoad(key: key, hash: table.hash(of: slot), waiters: [waiter])
        table.beginLoad(slot, generation: generation)
        counters.recordMiss()
        return .enqueued(
            startLoad: startLoad(key: key, generation: generation), released: released,
            softTimeout: !forced && configuration.failSafe?.softTimeout == true && table[slot].value != nil
        )
    }

    /// The soft timeout of waiter `id` of `key` ended (it was told `softTimeout` on
    /// registration): if it still waits for the key's load and the expired value is still within
    /// the fail-safe's maximum staleness, it is taken out, counted, and answered with that value.
    @usableFromInline
    mutating func softTimeoutEnded(key: Key, id: WaiterID, now: Int64) -> (waiter: Waiter, value: Value)? {
        guard let bucket = table.findBucket(key), let value = table.buckets[bucket]!.value,
            case let running = table.load(of: table.buckets[bucket]!.slot), running != 0,
            keepsForFailSafe(key, expiredAt: expiry(ofBucket: bucket), now: now),
            let waiter = loadSlots[Self.slot(running)]!.flight.remove(id)
        else { return nil }
        counters.softTimeouts += 1
        return (waiter, value)
    }

    /// An async caller's task was cancelled: take its waiter out, if still stored.
    @usableFromInline
    mutating func cancelWaiter(key: Key, id: WaiterID) -> Waiter? {
        if let slot = table.find(key), case let running = table.load(of: slot), running != 0,
            let waiter = loadSlots[Self.slot(running)]!.flight.remove(id)
        {
            counters.callerCancellations += 1
            return waiter
        }
        guard detachedLoads > 0 else { return nil }
        var holder: Int?
        for slot in loadSlots.indices {
            if let load = loadSlots[slot], !load.attached, load.flight.holds(id) {
                holder = slot
                break
            }
        }
        guard let holder, let waiter = loadSlots[holder]!.flight.remove(id) else { return nil }
        counters.callerCancellations += 1
        return waiter
    }

    // MARK: Loads

    /// An attempt of load `generation` returned `result`; `cost` is the cost of a success when
    /// a cost bound is configured, `expiresIn` its own time to live when the cache has an
    /// `expiry` that gave one (both computed by the owner before taking the lock).
    /// `failureExpiresIn`: with a failure, how long to keep it (the cache's `failureExpiry`).
    @inlinable
    mutating func attemptFinished(
        generation finished: Generation, result: Result<Value, any Error>, cost: Int = 0, expiresIn: Int64? = nil,
        failureExpiresIn: Int64? = nil, tags: Set<String>? = nil, now: Int64
    ) -> AttemptFinishedAction {
        if case .failure = result {
            var jitter = configuration.jitter  // copies share one generator
            let slot = Self.slot(finished)
            if let delay = loadSlots[slot]!.flight.nextRetryDelay(policy: configuration.retry, jitter: &jitter) {
                loadSlots[slot]!.inBackoff = true
                counters.recordRetry()
                return .retry(after: delay)
            }
        }
        let load = endLoad(finished)
        var released = Released()
        released.key = load.key
        if case .failure = result { counters.recordFailure() }
        var next: StartLoad?
        var delivered = result
        if load.attached, !load.stores {
            next = endSuperseded(load, &released)
        } else if load.attached {
            switch result {
            case .failure(let error):
                if configuration.failSafe != nil,
                    let stale = failSafeValue(load.key, hash: load.hash, error: error, callers: load.flight.waiters.count, now: now)
                {
                    delivered = .success(stale)
                } else if let failureExpiresIn, failureExpiresIn > 0 {
                    keepFailure(error, of: load.key, until: now &+ min(failureExpiresIn, Configuration.forever), now: now)
                }
            case .success:
                if !failures.isEmpty { failures[load.key] = nil }
                if !failSafeSince.isEmpty { failSafeSince[load.key] = nil }
            }
            // The node is read and written in its bucket, in place: `table[slot]` copies the
            // whole node at each access.
            let bucket = table.findBucket(load.key, hash: load.hash)!
            let slot = table.buckets[bucket]!.slot
            assert(table.load(of: slot) == finished, "an attached load names its entry")
            if case .success(let value) = result, let lifetime = configuration.lifetime(expiresIn: expiresIn) {
                if let old = table.buckets[bucket]!.value.take() {
                    noteRemoval(load.key, old, .replaced, &released)
                    released.values.append(old)
                }
                if let maximumCost = configuration.maximumCost, cost > maximumCost {
                    // Too costly to keep at all: delivered, not cached (nor the older value).
                    table.setCost(slot, 0)
                    if !tagged.isEmpty { tagged[load.key] = nil }
                } else {
                    table.buckets[bucket]!.value = value
                    setLifetime(lifetime, bucket: bucket, key: load.key, now: now)
                    table.setCost(slot, cost)
                    if tags != nil || !tagged.isEmpty { tag(load.key, tags) }
                }
            }
            if let followUp = load.flight.followUp {
                let generation = beginLoad(key: load.key, hash: load.hash, waiters: followUp)
                table.replaceLoad(slot, with: generation)
                next = startLoad(key: load.key, generation: generation)
            } else if table.buckets[bucket]!.value != nil, freshness(ofBucket: bucket, now: now) != .unusable
            {
                table.endLoad(slot)
                // Restore the bounds, never evicting this result.
                restoreBounds(keepingHead: true, &released)
            } else {
                forgetEntry(load.key)
                let removed = table.remove(slot)
                noteRemoval(load.key, removed.node.value, .expired, &released)  // unusable, if any
                released.removed.append(removed)
            }
        } else {
            detachedLoads -= 1
        }
        return .finish(waiters: load.flight.waiters, result: delivered, next: next, released: released)
    }

    /// Puts `value` as `key`'s value at `now` (a write-through, a DataLoader's prime), as a load
    /// that finished would store it (`cost` and `expiresIn` as for ``attemptFinished``): it
    /// replaces a cached value, and a load in flight for the key delivers its result to its own
    /// waiters without storing it. Ends a kept failure and a fail-safe. Nothing is stored when
    /// the value would not be kept (a zero time to live, a cost above the bound).
    @usableFromInline
    mutating func put(
        key: Key, value: Value, cost: Int = 0, expiresIn: Int64? = nil, tags: Set<String>? = nil, now: Int64
    ) -> Released {
        store(value, for: key, cost: cost, expiresIn: expiresIn, tags: tags, now: now, overLoadInFlight: true)
    }

    /// Stores `value` as `key`'s, as a finished load would ("finished": its expiry and cost, the
    /// bounds restored without evicting it), for ``put(key:value:cost:expiresIn:now:)`` and
    /// ``cacheExtra(key:value:cost:expiresIn:now:)``. A key with a load in flight is left to
    /// that load, or, with `overLoadInFlight`, gets the value while the load is marked not to
    /// store its result. Ends a kept failure and a fail-safe of the key.
    @inlinable
    mutating func store(
        _ value: Value, for key: Key, cost: Int, expiresIn: Int64?, tags: Set<String>?, now: Int64, overLoadInFlight: Bool
    ) -> Released {
        var released = Released()
        guard let lifetime = configuration.lifetime(expiresIn: expiresIn) else { return released }
        if let maximumCost = configuration.maximumCost, cost > maximumCost { return released }
        let hash = UInt32(truncatingIfNeeded: key.hashValue)
        let slot: Int32
        var loading = false
        if let bucket = table.findBucket(key, hash: hash) {
            slot = table.buckets[bucket]!.slot
            let running = table.load(of: slot)
            if running != 0 {
                guard overLoadInFlight else { return released }
                loadSlots[Self.slot(running)]!.stores = false
                loading = true
            } else {
                table.beginLoad(slot, generation: UInt64.max)  // out of the queue while it changes
            }
            if let old = table[slot].value {
                noteRemoval(key, old, .replaced, &released)
                released.values.append(old)
            }
        } else {
            makeRoom(&released)
            slot = table.insertLoading(key, hash: hash, generation: UInt64.max)
        }
        table[slot].value = value
        setLifetime(lifetime, bucket: Int(table.bucketOf[Int(slot)]), key: key, now: now)
        table.setCost(slot, cost)
        if !loading { table.endLoad(slot) }
        if !failures.isEmpty { failures[key] = nil }
        if !failSafeSince.isEmpty { failSafeSince[key] = nil }
        if tags != nil || !tagged.isEmpty { tag(key, tags) }
        restoreBounds(keepingHead: !loading, &released)
        return released
    }

    /// The end of `load`, whose entry's value `put` replaced while it ran: the entry keeps that
    /// value; the forced callers waiting for a follow-up get it now (returned to start).
    @usableFromInline
    mutating func endSuperseded(_ load: Load, _ released: inout Released) -> StartLoad? {
        let slot = table.find(load.key)!
        if let followUp = load.flight.followUp {
            let generation = beginLoad(key: load.key, hash: load.hash, waiters: followUp)
            table.replaceLoad(slot, with: generation)
            return startLoad(key: load.key, generation: generation)
        }
        table.endLoad(slot)
        restoreBounds(keepingHead: false, &released)
        return nil
    }

    /// The keys whose cached value has `tag` (for ``KeyedMonoTask/invalidate(tag:)``).
    @usableFromInline
    func keys(taggedWith tag: String) -> [Key] {
        tagged.compactMap { $0.value.contains(tag) ? $0.key : nil }
    }

    /// Records `tags` as those of `key`'s new value (none: forgets the key's).
    @usableFromInline
    mutating func tag(_ key: Key, _ tags: Set<String>?) {
        if let tags, !tags.isEmpty {
            tagged[key] = tags
        } else {
            tagged[key] = nil
        }
    }

    /// `value` of `key` left the cache for `cause`: counted, and queued for the listener (the
    /// first queued while nobody delivers makes this call's owner the one to deliver).
    @inlinable
    mutating func noteRemoval(_ key: Key, _ value: Value?, _ cause: KeyedMonoTaskRemovalCause, _ released: inout Released) {
        switch cause.cause {
        case .evictedForSize, .evictedForCost:
            // Evictions are counted by entry, with or without a value, as before.
            counters.recordEviction()
            if cause.cause == .evictedForSize { released.causes.evictedForSize += 1 } else {
                released.causes.evictedForCost += 1
                counters.recordCostEviction()
            }
            guard value != nil else { return }
        case .expired:
            guard value != nil else { return }
            counters.recordExpiration()
            released.causes.expired += 1
        case .invalidated:
            guard value != nil else { return }
            released.causes.invalidated += 1
        case .replaced:
            guard value != nil else { return }
            counters.recordReplacement()
            released.causes.replaced += 1
        }
        guard configuration.notifiesRemovals, let value else { return }
        removals.append(Removal(key: key, value: value, cause: cause))
        if !deliveringRemovals {
            deliveringRemovals = true
            released.notifies = true
        }
    }

    /// The removals to deliver next, for the owner that was told to deliver (``Released/notifies``);
    /// `nil` when there are none left, which ends its turn.
    @usableFromInline
    mutating func takeRemovals() -> [Removal]? {
        guard !removals.isEmpty else {
            deliveringRemovals = false
            return nil
        }
        defer { removals = [] }
        return removals
    }

    /// `key`'s entry is gone: its fail-safe and its tags go with it.
    @inlinable
    mutating func forgetEntry(_ key: Key) {
        if !failSafeSince.isEmpty { failSafeSince[key] = nil }
        if !tagged.isEmpty { tagged[key] = nil }
        if !expiries.isEmpty { expiries[key] = nil }
    }

    /// Every key with an entry or a kept failure (for ``KeyedMonoTask/invalidate(where:)``,
    /// which tests them outside the lock).
    @usableFromInline
    var keys: [Key] {
        var keys = table.nodes.map(\.key)
        for key in failures.keys where table.find(key) == nil { keys.append(key) }
        return keys
    }

    /// Another shard's load finished with the cache above a bound and nothing left to evict
    /// there: evicts from this shard until the bounds hold or nothing here may go.
    @inlinable
    mutating func evictWhileOverBound() -> Released {
        var released = Released()
        restoreBounds(keepingHead: false, &released)
        return released
    }

    /// A batch load returned `value` for `key` besides the keys it was asked for: caches it,
    /// as a finished load would, when the key has no entry (making room as a new key does, and
    /// restoring the bounds without evicting it) or an idle one. A key whose load is in flight
    /// is left to that load. `cost` is the value's cost with a cost bound.
    @inlinable
    mutating func cacheExtra(
        key: Key, value: Value, cost: Int = 0, expiresIn: Int64? = nil, tags: Set<String>? = nil, now: Int64
    ) -> Released {
        store(value, for: key, cost: cost, expiresIn: expiresIn, tags: tags, now: now, overLoadInFlight: false)
    }

    /// The backoff delay of load `generation` is over: its next attempt starts.
    @inlinable
    mutating func retryDue(generation: Generation) {
        loadSlots[Self.slot(generation)]!.inBackoff = false
    }

    // MARK: Invalidation

    /// Removes the entry of `key`. A load in flight is detached: its waiters still get its result,
    /// which is not stored. Forced callers waiting for a follow-up get a new load at once.
    mutating func invalidate(_ key: Key) -> (startLoad: StartLoad?, released: Released) {
        var released = Released()
        if !failures.isEmpty { failures[key] = nil }
        forgetEntry(key)
        guard let slot = table.find(key) else { return (nil, released) }
        let running = table.load(of: slot)
        let removed = table.remove(slot)
        noteRemoval(key, removed.node.value, .invalidated, &released)
        released.removed.append(removed)
        counters.invalidations += 1
        guard running != 0 else { return (nil, released) }
        return (detach(running, released: &released), released)
    }

    /// Removes every entry; see ``invalidate(_:)``.
    mutating func invalidateAll() -> (startLoads: [StartLoad], released: Released) {
        var released = Released()
        failures = [:]
        failSafeSince = [:]
        tagged = [:]
        expiries = [:]
        let old = table.removeAll()
        counters.invalidations += old.nodes.count
        for node in old.nodes { noteRemoval(node.key, node.value, .invalidated, &released) }
        var starts: [StartLoad] = []
        for load in old.loads where load != 0 {
            if let start = detach(load, released: &released) { starts.append(start) }
        }
        released.table = old.nodes
        return (starts, released)
    }

    private mutating func detach(_ running: Generation, released: inout Released) -> StartLoad? {
        let slot = Self.slot(running)
        loadSlots[slot]!.attached = false
        detachedLoads += 1
        guard let followUp = loadSlots[slot]!.flight.followUp else { return nil }
        loadSlots[slot]!.flight.followUp = nil
        // The forced callers asked for a load that begins after their call: a new entry, now.
        let key = loadSlots[slot]!.key
        let hash = loadSlots[slot]!.hash
        makeRoom(&released)
        let generation = beginLoad(key: key, hash: hash, waiters: followUp)
        _ = table.insertLoading(key, hash: hash, generation: generation)
        return startLoad(key: key, generation: generation)
    }

    // MARK: Helpers

    /// Evicts (into `released`) while the whole cache is at its entry bound: room for a new key.
    @inlinable
    mutating func makeRoom(_ released: inout Released) {
        while isFull(), let evicted = table.evict(keepingHead: false) {
            forgetEntry(evicted.node.key)
            noteRemoval(evicted.node.key, evicted.node.value, .evictedForSize, &released)
            released.removed.append(evicted)
        }
    }

    /// Evicts (into `released`) while the whole cache is above a bound, never the head with
    /// `keepingHead` (the value that just arrived); sets `released.overBound` when this shard
    /// had nothing more to evict.
    @inlinable
    mutating func restoreBounds(keepingHead: Bool, _ released: inout Released) {
        while isOverBound() {
            // The count first: a cache over both bounds evicts for its size.
            let cause: KeyedMonoTaskRemovalCause =
                table.occupancy.entryCount > configuration.maximumEntries ? .evictedForSize : .evictedForCost
            guard let evicted = table.evict(keepingHead: keepingHead) else { break }
            forgetEntry(evicted.node.key)
            noteRemoval(evicted.node.key, evicted.node.value, cause, &released)
            released.removed.append(evicted)
        }
        released.overBound = isOverBound()
    }

    /// A usable value in the node in `bucket`: fresh (and now marked read) or stale
    /// (starting a refresh if none is in flight). `nil` when the entry has no usable value.
    @inlinable @inline(__always)
    mutating func cacheHit(bucket: Int, now: Int64) -> (value: Value, refresh: StartLoad?)? {
        guard let value = table.buckets[bucket]!.value else { return nil }
        switch freshness(ofBucket: bucket, now: now) {
        case .fresh:
            counters.recordHit()
            table.markRead(bucket: bucket)
            return (value, nil)
        case .due:
            counters.recordHit()
            table.markRead(bucket: bucket)
            return (value, refreshAhead(table.buckets[bucket]!.slot))
        case .stale:
            return (value, staleHit(table.buckets[bucket]!.slot))
        case .unusable:
            return nil
        }
    }

    /// A stale value is served: start the one background refresh unless a load is in flight.
    @inlinable
    mutating func staleHit(_ slot: Int32) -> StartLoad? {
        counters.recordStaleHit()
        return beginBackgroundLoad(slot)
    }

    /// Begins a load without waiters of the served value in `slot` (a stale-while-revalidate or
    /// refresh-ahead reload), unless a load of it is in flight.
    @inlinable
    mutating func beginBackgroundLoad(_ slot: Int32) -> StartLoad? {
        guard table.load(of: slot) == 0 else { return nil }
        let key = table[slot].key
        let generation = beginLoad(key: key, hash: table.hash(of: slot), waiters: [])
        table.beginLoad(slot, generation: generation)
        return startLoad(key: key, generation: generation)
    }

    /// A value due for a refresh is served: start the one background refresh unless a load is in
    /// flight.
    @usableFromInline
    mutating func refreshAhead(_ slot: Int32) -> StartLoad? {
        guard var start = beginBackgroundLoad(slot) else { return nil }
        counters.refreshesAhead += 1  // (not inlinable: the setter is internal)
        start.refreshesAhead = true
        return start
    }

    /// The order to start load `generation` of `key`.
    @inlinable
    func startLoad(key: Key, generation: Generation) -> StartLoad {
        StartLoad(key: key, generation: generation, keyMayRepeat: detachedLoads > 0)
    }

    /// Creates a load in a free slot of `loadSlots` and returns its generation.
    @inlinable
    mutating func beginLoad(key: Key, hash: UInt32, waiters: [WaiterEntry]) -> Generation {
        loadsBegun &+= 1
        counters.recordLoad()
        // The load is made where it is stored: a local stored then was copied (an outlined
        // copy and destroy of the whole load, ~120 instructions a load).
        let slot: Int
        if let free = freeLoadSlots.popLast() {
            slot = Int(free)
            loadSlots[slot] = Load(key: key, hash: hash, waiters: waiters)
        } else {
            precondition(loadSlots.count < Int(Int32.max), "KeyedMonoTask: more than \(Int32.max) loads in flight")
            slot = loadSlots.count
            loadSlots.append(Load(key: key, hash: hash, waiters: waiters))
        }
        loadsInFlight += 1
        let sequence = loadsBegun % 0x7FFF_FFFF + 1
        return sequence << 32 | UInt64(slot)
    }

    /// `lifetime` shortened by a random duration in 0 … `expiryJitter` (never below zero; a value
    /// kept forever stays so).
    @usableFromInline
    func jittered(_ lifetime: Int64) -> Int64 {
        guard lifetime < Configuration.forever else { return lifetime }
        var randomness = configuration.jitter  // copies share one generator
        return max(0, lifetime &- Int64.random(in: 0...configuration.expiryJitter, using: &randomness))
    }

    /// Whether a value of `key` that expired at `expiredAt` is still within the fail-safe's
    /// maximum staleness at `now` (counted from the value's first expiry), so that a reload
    /// keeps it to answer for a failure.
    @usableFromInline
    func keepsForFailSafe(_ key: Key, expiredAt: Int64, now: Int64) -> Bool {
        guard let failSafe = configuration.failSafe else { return false }
        return now &- (failSafeSince[key] ?? expiredAt) <= failSafe.maximumStaleness
    }

    /// The fail-safe's answer to the final failure `error` of `key`'s attached load, which
    /// `callers` wait for: the entry's value if it has expired, within the maximum staleness,
    /// which is then fresh for the throttle (counted as fail-safe hits); `nil` when there is no
    /// such value or the error is a `CancellationError`.
    @usableFromInline
    mutating func failSafeValue(_ key: Key, hash: UInt32, error: any Error, callers: Int, now: Int64) -> Value? {
        guard let failSafe = configuration.failSafe, !(error is CancellationError),
            let bucket = table.findBucket(key, hash: hash), let value = table.buckets[bucket]!.value
        else { return nil }
        let expiresAt = expiry(ofBucket: bucket)
        guard now &- expiresAt >= 0, keepsForFailSafe(key, expiredAt: expiresAt, now: now) else { return nil }
        if failSafeSince[key] == nil { failSafeSince[key] = expiresAt }
        table.buckets[bucket]!.expiresAt = now &+ failSafe.throttle
        if !expiries.isEmpty { expiries[key] = nil }
        counters.failSafeHits += callers
        return value
    }

    /// The failure kept for `key` if it has not expired at `now` (counted as a negative hit); an
    /// expired one is dropped.
    @usableFromInline
    mutating func keptFailure(_ key: Key, now: Int64) -> (any Error)? {
        guard let kept = failures[key] else { return nil }
        guard now &- kept.expiresAt < 0 else {
            failures[key] = nil
            return nil
        }
        counters.negativeHits += 1
        return kept.error
    }

    /// Keeps `error` as `key`'s answer until `expiresAt`, within the bound: expired failures go
    /// first, then the oldest.
    @usableFromInline
    mutating func keepFailure(_ error: any Error, of key: Key, until expiresAt: Int64, now: Int64) {
        failuresKept &+= 1
        failures[key] = KeptFailure(error: error, expiresAt: expiresAt, sequence: failuresKept)
        guard failures.count > configuration.maximumEntries else { return }
        failures = failures.filter { now &- $0.value.expiresAt < 0 }
        while failures.count > configuration.maximumEntries,
            let oldest = failures.min(by: { $0.value.sequence < $1.value.sequence })?.key
        {
            failures[oldest] = nil
        }
    }

    /// Takes load `generation` out of `loadSlots`, freeing its slot.
    @inlinable
    mutating func endLoad(_ generation: Generation) -> Load {
        let slot = Self.slot(generation)
        let load = loadSlots[slot].take()!
        loadsInFlight -= 1
        if loadsInFlight == 0, loadSlots.count > 64 {
            // A burst of loads (a batch of misses) grew the slots; give the memory back.
            loadSlots = []
            freeLoadSlots = []
        } else {
            freeLoadSlots.append(Int32(slot))
        }
        return load
    }
}

// What crosses a shard's lock (``KeyedMonoTaskShard/withLock(_:)`` returns only `Sendable`
// values): the machine's actions and, for tests, the machine itself. Checked conformances: every
// stored property is `Sendable` when the key, value and waiter are.
extension KeyedMonoTaskStateMachine: Sendable where Key: Sendable, Value: Sendable, Waiter: Sendable {}
extension KeyedMonoTaskStateMachine.Configuration: Sendable where Key: Sendable, Value: Sendable, Waiter: Sendable {}
extension KeyedMonoTaskStateMachine.Load: Sendable where Key: Sendable, Value: Sendable, Waiter: Sendable {}
extension KeyedMonoTaskStateMachine.KeptFailure: Sendable where Key: Sendable, Value: Sendable, Waiter: Sendable {}
extension KeyedMonoTaskStateMachine.StartLoad: Sendable where Key: Sendable, Value: Sendable, Waiter: Sendable {}
extension KeyedMonoTaskStateMachine.Released: Sendable where Key: Sendable, Value: Sendable, Waiter: Sendable {}
extension KeyedMonoTaskStateMachine.Removal: Sendable where Key: Sendable, Value: Sendable, Waiter: Sendable {}
extension KeyedMonoTaskStateMachine.FastPathAction: Sendable where Key: Sendable, Value: Sendable, Waiter: Sendable {}
extension KeyedMonoTaskStateMachine.RequestAction: Sendable where Key: Sendable, Value: Sendable, Waiter: Sendable {}
extension KeyedMonoTaskStateMachine.AttemptFinishedAction: Sendable
where Key: Sendable, Value: Sendable, Waiter: Sendable {}

extension Duration {
    /// About 73 years in nanoseconds: the age a value kept "forever" never reaches.
    static var keyedMonoTaskForever: Int64 { Int64.max / 4 }

    /// This duration in whole nanoseconds, clamped to about ±73 years
    /// (``KeyedMonoTaskStateMachine/Configuration/forever``): the unit of ``KeyedMonoTask``'s
    /// machine and of ``MonoTaskTimeSource/nowNanoseconds()``.
    var keyedMonoTaskNanoseconds: Int64 {
        let forever = Self.keyedMonoTaskForever
        let (seconds, attoseconds) = components
        let limit = forever / 1_000_000_000
        if seconds >= limit { return forever }
        if seconds <= -limit { return -forever }
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
