/// The rules of ``MonoTask`` as a pure value type: no locks, no threads, no clocks, no user code.
///
/// Every method takes the current time as an offset (`Duration`) from the owner's clock origin,
/// mutates the state and returns an *action* that the owner performs after releasing its lock:
/// which waiters to deliver to, which load to start, which load's `Task` to cancel. The owner
/// (``MonoTask``) keeps one instance inside a `LockedState`.
///
/// `Waiter` is whatever the owner needs to deliver a result (a continuation or a callback in
/// ``MonoTask``; plain values in tests). Each stored waiter is handed back exactly once, by
/// exactly one of ``attemptFinished(generation:result:now:)`` (final delivery),
/// ``clearResult(strategy:restartWhenIdle:)`` (`.cancel`) or ``cancelWaiter(_:)``.
///
/// Vocabulary:
/// - A *load* is one logical execution: the first attempt plus its retries. Each load has a unique
///   *generation*; a load's attempts report with their generation, so a report from a load that
///   was cancelled or replaced is recognised as stale and ignored.
/// - An *attempt body* is one call of the user's task block. At most one body is active at any
///   time, even across a `.cancel`: a cancelled body that is still running is a *zombie*, and the
///   next load waits (`pendingStart`) until it has returned.
@usableFromInline
struct MonoTaskStateMachine<Value: Sendable, Waiter> {
    @usableFromInline typealias Generation = UInt64
    @usableFromInline typealias WaiterID = UInt64
    typealias Strategy = MonoTask<Value>.OngoingExecutionStrategy

    /// The validated configuration.
    @usableFromInline
    struct Configuration {
        /// How long a success stays cached after completion; `nil` means until cleared.
        @usableFromInline var timeToLive: Duration?
        /// When a hit on a cached value starts a background refresh (``RefreshAhead``).
        @usableFromInline var refreshAhead: RefreshAhead?
        /// The retry policy of each load.
        @usableFromInline var retry: RetryCount
        /// The randomness of the retry delays' jitter.
        var jitter: RetryJitter
        /// An expired value answers for a failed reload (``FailSafe``); `nil` for never.
        @usableFromInline var failSafe: FailSafe?
        /// The most a stored value's time to live is shortened at random (`.zero`: never).
        var expiryJitter: Duration

        @usableFromInline
        init(
            timeToLive: Duration?, refreshAhead: RefreshAhead?, retry: RetryCount, jitter: RetryJitter = .system,
            failSafe: FailSafe? = nil, expiryJitter: Duration = .zero
        ) {
            self.timeToLive = timeToLive
            self.refreshAhead = refreshAhead
            self.retry = retry
            self.jitter = jitter
            self.failSafe = failSafe
            self.expiryJitter = expiryJitter
        }
    }

    @usableFromInline
    enum Phase: Equatable {
        /// Created while a cancelled attempt body is still running; starts when it returns.
        case pendingStart
        /// An attempt body is running.
        case running
        /// Waiting for the backoff delay before the next attempt.
        case backoff
    }

    @usableFromInline typealias Entry = IdentifiedWaiter<Waiter>

    @usableFromInline
    struct Execution {
        var generation: Generation
        @usableFromInline var phase: Phase
        /// Its waiters, its follow-up's, and its retries (the rules ``KeyedMonoTask`` shares).
        @usableFromInline var flight: SingleFlight<Waiter>
        /// `clearResult(.restart)` arrived: discard this load's result and start a fresh load.
        @usableFromInline var restartPending: Bool
        /// `false` once ``put(_:expiresIn:now:)`` stored a value while it ran: its result goes to
        /// its waiters but is not stored over the value put (nor kept as a failure).
        @usableFromInline var stores = true
    }

    @usableFromInline
    struct Cached {
        @usableFromInline var value: Value
        /// When a hit starts a refresh ahead; `nil` for never (no ``RefreshAhead``, or the value
        /// expires first).
        @usableFromInline var refreshAt: Duration?
        /// When it stops being fresh: when it was stored plus its time to live (the configured one, or
        /// the value's own from `expiry`); `nil` when it never does.
        @usableFromInline var expiresAt: Duration?
        /// While the value answers for failed reloads (``FailSafe``): when it first expired, from
        /// which its staleness is counted; `nil` otherwise.
        @usableFromInline var failSafeSince: Duration? = nil
    }

    // MARK: Actions

    @usableFromInline
    enum FastPathAction {
        /// A fresh cached value; start the given load in the background if non-`nil` (refresh).
        case hit(Value, startRun: Generation?)
        /// No usable cached value: register a waiter with this identifier.
        case miss(WaiterID)
    }

    @usableFromInline
    enum ExecuteAction {
        /// A fresh cached value for the caller, who was not stored; maybe start a background refresh.
        case deliverCached(Value, startRun: Generation?)
        /// A kept failure (negative caching) for the caller, who was not stored.
        case deliverFailure(any Error)
        /// The waiter (if any) was stored; start the given load if non-`nil`. `softTimeout`: an
        /// expired value the fail-safe keeps is at hand, so the caller may get it when its soft
        /// timeout ends first (``softTimeoutEnded(id:now:)``).
        case enqueued(startRun: Generation?, softTimeout: Bool = false)
        /// The caller's task was already cancelled: not stored; fail it with `CancellationError`.
        case callerCancelled
    }

    enum AttemptFinishedAction {
        /// Nothing to do (for example a stale report from a cancelled load).
        case none
        /// Sleep for the delay, then ask ``retryDue(generation:)``.
        case retry(after: Duration)
        /// Deliver `result` to `waiters` (registration order); then start `startRun` if non-`nil`.
        case finish(waiters: [Waiter], result: Result<Value, any Error>, startRun: Generation?)
        /// Start this load (a restart, or a load that was waiting for a zombie body to return).
        case startRun(Generation)
    }

    enum ClearAction {
        case none
        /// Start load `generation`; cancel the `Task` of load `cancelRun` if non-`nil`.
        case startRun(Generation, cancelRun: Generation?)
        /// Fail `waiters` with ``MonoTask/Errors/executionCancelledDueToClearResult`` and cancel
        /// the `Task` of run `cancelRun` if non-`nil`.
        case failWaiters([Waiter], cancelRun: Generation?)
    }

    // MARK: State

    @usableFromInline let configuration: Configuration
    @usableFromInline private(set) var cached: Cached?
    /// The last load's failure while it is kept (negative caching: the task's `failureExpiry`
    /// gave it a time to live), and when it expires.
    @usableFromInline private(set) var keptFailure: (error: any Error, expiresAt: Duration)?
    @usableFromInline private(set) var execution: Execution?
    /// The generation of the most recently created load.
    private(set) var generation: Generation = 0
    /// Attempt bodies of cancelled loads that have not returned yet.
    private(set) var zombieBodies = 0
    @usableFromInline var lastWaiterID: WaiterID = 0
    @usableFromInline private(set) var counters = MonoTaskCounters()

    init(configuration: Configuration) {
        self.configuration = configuration
    }

    // MARK: Queries

    /// Whether a load exists (started, pending start, or between attempts).
    var isExecuting: Bool { execution != nil }

    /// Whether load `generation` is the current one.
    func isLive(_ generation: Generation) -> Bool {
        execution?.generation == generation
    }

    /// The cached value if it is still within its time to live at `now`.
    func currentValue(now: Duration) -> Value? {
        guard let cached, isFresh(cached, now: now) else { return nil }
        return cached.value
    }

    @inlinable
    func isFresh(_ cached: Cached, now: Duration) -> Bool {
        // A value whose time to live is zero is never stored: callers then pass no time (`.zero`).
        guard let expiresAt = cached.expiresAt else { return true }
        return now < expiresAt
    }

    /// Whether a hit on `cached` starts a refresh ahead; never while a fail-safe serves it (the
    /// throttle decides when the loader is called again).
    @inlinable
    func isRefreshDue(_ cached: Cached, now: Duration) -> Bool {
        guard let refreshAt = cached.refreshAt else { return false }
        return now >= refreshAt && cached.failSafeSince == nil
    }

    // MARK: Callers

    /// The lock-held fast path of an async caller: a cache hit, or a waiter identifier to register.
    @inlinable
    mutating func fastPath(forceUpdate: Bool, now: Duration) -> FastPathAction {
        if !forceUpdate, let hit = cacheHit(now: now) {
            return .hit(hit.value, startRun: hit.startRun)
        }
        lastWaiterID &+= 1
        return .miss(lastWaiterID)
    }

    /// A new waiter identifier (for a callback caller; async callers get theirs from ``fastPath``).
    mutating func makeWaiterID() -> WaiterID {
        lastWaiterID &+= 1
        return lastWaiterID
    }

    /// A caller asks for the result. `waiter` is `nil` for fire-and-forget calls. Inlinable, so
    /// a caller joining a load executes code specialised for its value type.
    @inlinable
    mutating func execute(
        waiter: Waiter?, id: WaiterID, forceUpdate: Bool, now: Duration, callerCancelled: Bool = false
    ) -> ExecuteAction {
        if !forceUpdate, let hit = cacheHit(now: now) {
            return .deliverCached(hit.value, startRun: hit.startRun)
        }
        if callerCancelled {
            return .callerCancelled
        }
        if keptFailure != nil, !forceUpdate, execution == nil, let error = failureStillKept(now: now) {
            return .deliverFailure(error)
        }
        let softTimeout = waiter != nil && !forceUpdate && configuration.failSafe?.softTimeout != nil
            && failSafeStillServes(now: now)
        guard execution != nil else {
            return .enqueued(
                startRun: beginRun(waiters: waiter.map { [Entry(id: id, waiter: $0)] } ?? []), softTimeout: softTimeout
            )
        }
        // The load is mutated in place (`execution!`), so its arrays stay uniquely referenced.
        // A forced caller must not get the result of a load that began before its call. A load
        // still pending its start, or one whose result will be discarded by a restart, is fine.
        let needsFollowUp = forceUpdate && execution!.phase != .pendingStart && !execution!.restartPending
        execution!.flight.join(waiter.map { Entry(id: id, waiter: $0) }, forced: needsFollowUp)
        if waiter != nil { counters.recordMerge() }
        return .enqueued(startRun: nil, softTimeout: softTimeout)
    }

    /// Puts `value` as the cached value at `now` (a write-through after an update), as a load
    /// that finished would store it: it replaces the cached value, ends a kept failure and a
    /// fail-safe, and a load in flight delivers its result to its own waiters without storing
    /// it. Returns the value it replaced, to be destroyed after the lock.
    mutating func put(_ value: Value, expiresIn: Duration?, now: Duration) -> Cached? {
        let old = cached
        keptFailure = nil
        cached = stored(value, expiresIn: expiresIn, now: now)
        if execution != nil { execution!.stores = false }
        return old
    }

    /// `value` as stored at `now`: its time to live (its own `expiresIn`, or the configured one)
    /// shortened by the jitter, its refresh point; `nil` when it is not kept at all (a zero
    /// time to live: callers are still merged, and an older value is dropped).
    @usableFromInline
    func stored(_ value: Value, expiresIn: Duration?, now: Duration) -> Cached? {
        var lifetime = expiresIn.map { max($0, .zero) } ?? configuration.timeToLive
        if let kept = lifetime, kept > .zero, configuration.expiryJitter > .zero {
            // Shortened at random, so that tasks loaded together do not expire together.
            var randomness = configuration.jitter  // copies share one generator
            let cut = Int64.random(in: 0...configuration.expiryJitter.keyedMonoTaskNanoseconds, using: &randomness)
            lifetime = max(kept - .nanoseconds(cut), .zero)
        }
        guard lifetime != .zero else { return nil }
        return Cached(
            value: value, refreshAt: configuration.refreshAhead?.due(within: lifetime).map { now + $0 },
            expiresAt: lifetime.map { now + $0 }
        )
    }

    /// The soft timeout of waiter `id` ended (it was told `softTimeout` on registration): if it
    /// still waits for the load and the expired value is still within the fail-safe's maximum
    /// staleness, it is taken out, counted, and answered with that value.
    mutating func softTimeoutEnded(id: WaiterID, now: Duration) -> (waiter: Waiter, value: Value)? {
        guard execution != nil, let cached, failSafeStillServes(now: now),
            let waiter = execution!.flight.remove(id)
        else { return nil }
        counters.softTimeouts += 1
        return (waiter, cached.value)
    }

    /// Whether the cached value has expired (a fresh one is a hit) but no longer ago than the
    /// fail-safe's maximum staleness, counted from its first expiry.
    @usableFromInline
    func failSafeStillServes(now: Duration) -> Bool {
        guard let failSafe = configuration.failSafe, let cached, let expiresAt = cached.expiresAt else { return false }
        return now - (cached.failSafeSince ?? expiresAt) <= failSafe.maximumStaleness
    }

    /// An async caller's task was cancelled: take its waiter out, if still stored.
    @usableFromInline
    mutating func cancelWaiter(_ id: WaiterID) -> Waiter? {
        guard execution != nil, let waiter = execution!.flight.remove(id) else { return nil }
        counters.callerCancellations += 1
        return waiter
    }

    // MARK: Runs

    /// An attempt body of load `generation` returned `result`; `expiresIn` is a success's own
    /// time to live when the task has an `expiry` that gave one, `failureExpiresIn` how long to
    /// keep a failure when its `failureExpiry` says (both computed by the owner before taking the
    /// lock; a negative one counts as zero).
    mutating func attemptFinished(
        generation finished: Generation, result: Result<Value, any Error>, expiresIn: Duration? = nil,
        failureExpiresIn: Duration? = nil, now: Duration
    ) -> AttemptFinishedAction {
        guard var current = execution, current.generation == finished, current.phase == .running else {
            // A zombie body (its load was cancelled) returned: its result is discarded.
            if zombieBodies > 0 { zombieBodies -= 1 }
            if zombieBodies == 0, var pending = execution, pending.phase == .pendingStart {
                pending.phase = .running
                execution = pending
                return .startRun(pending.generation)
            }
            return .none
        }
        execution = nil
        if current.restartPending {
            return .startRun(replaceRun(current))
        }
        var delivered = result
        switch result {
        case .failure(let error):
            var jitter = configuration.jitter  // copies share one generator
            if let delay = current.flight.nextRetryDelay(policy: configuration.retry, jitter: &jitter) {
                current.phase = .backoff
                counters.retries += 1
                execution = current
                return .retry(after: delay)
            }
            if !current.stores {
                // A value was put meanwhile: the failure is its waiters' alone.
            } else if let stale = failSafeValue(for: error, now: now) {
                // The expired value answers instead of the error, and no failure is kept.
                keptFailure = nil
                counters.failSafeHits += current.flight.waiters.count
                delivered = .success(stale)
            } else {
                // The final failure: kept for callers arriving within its time, or not at all.
                keptFailure = failureExpiresIn.flatMap { $0 > .zero ? (error, now + $0) : nil }
            }
        case .success(let value):
            if current.stores {
                keptFailure = nil
                cached = stored(value, expiresIn: expiresIn, now: now)
            }
        }
        let waiters = Self.waiters(of: current.flight.waiters)
        var next: Generation?
        if let followUp = current.flight.followUp {
            next = beginRun(waiters: followUp)
        }
        return .finish(waiters: waiters, result: delivered, startRun: next)
    }

    /// The backoff delay of load `generation` is over: whether its next attempt may start now.
    mutating func retryDue(generation due: Generation) -> Bool {
        guard var current = execution, current.generation == due, current.phase == .backoff else {
            return false
        }
        current.phase = .running
        execution = current
        return true
    }

    /// The waiters of `entries`, in order. A loop, not `map`: unspecialised (this type is
    /// generic), `map` allocates once per element.
    private static func waiters(of entries: [Entry]) -> [Waiter] {
        var waiters: [Waiter] = []
        waiters.reserveCapacity(entries.count)
        for entry in entries { waiters.append(entry.waiter) }
        return waiters
    }

    // MARK: Cache control

    /// `clearResult(ongoingExecutionStrategy:restartWhenIdle:)`.
    mutating func clearResult(strategy: Strategy, restartWhenIdle: Bool) -> ClearAction {
        cached = nil
        keptFailure = nil
        guard var current = execution else {
            guard restartWhenIdle else { return .none }
            guard let started = beginRun(waiters: []) else { return .none }
            return .startRun(started, cancelRun: nil)
        }
        switch strategy {
        case .allowCompletion:
            return .none
        case .restart:
            switch current.phase {
            case .pendingStart:
                return .none  // it has not started: its result will already be fresh
            case .running:
                current.restartPending = true
                execution = current
                return .none
            case .backoff:
                // No body is running: replace the sleeping load with a fresh one right away.
                execution = nil
                return .startRun(replaceRun(current), cancelRun: current.generation)
            }
        case .cancel:
            execution = nil
            counters.cancellations += 1
            let waiters = Self.waiters(of: current.flight.allWaiters())
            switch current.phase {
            case .pendingStart:
                return .failWaiters(waiters, cancelRun: nil)
            case .running:
                zombieBodies += 1
                return .failWaiters(waiters, cancelRun: current.generation)
            case .backoff:
                return .failWaiters(waiters, cancelRun: current.generation)
            }
        }
    }

    // MARK: Helpers

    /// The fail-safe's answer to a load's final failure `error` at `now`: the cached value if it
    /// has expired at most ``FailSafe/maximumStaleness`` ago (counted from its first expiry),
    /// which is then served as fresh for the ``FailSafe/throttle``; `nil` when there is no
    /// fail-safe, no such value, or the error is a `CancellationError`.
    mutating func failSafeValue(for error: any Error, now: Duration) -> Value? {
        guard let failSafe = configuration.failSafe, !(error is CancellationError), var stale = cached,
            let expiresAt = stale.expiresAt, now >= expiresAt, failSafeStillServes(now: now)
        else { return nil }
        stale.failSafeSince = stale.failSafeSince ?? expiresAt
        stale.expiresAt = now + failSafe.throttle
        cached = stale
        return stale.value
    }

    /// The kept failure if it has not expired at `now` (counted as a negative hit); an expired
    /// one is dropped.
    @usableFromInline
    mutating func failureStillKept(now: Duration) -> (any Error)? {
        guard let kept = keptFailure else { return nil }
        guard now < kept.expiresAt else {
            keptFailure = nil
            return nil
        }
        counters.negativeHits += 1
        return kept.error
    }

    @inlinable
    mutating func cacheHit(now: Duration) -> (value: Value, startRun: Generation?)? {
        guard let cached, isFresh(cached, now: now) else { return nil }
        counters.recordHit()
        var startRun: Generation?
        if execution == nil, isRefreshDue(cached, now: now) {
            counters.recordRefreshAhead()
            startRun = beginBackgroundRun()
        }
        return (cached.value, startRun)
    }

    /// Creates a load without waiters (a refresh-ahead load); see ``beginRun(waiters:)``.
    @usableFromInline
    mutating func beginBackgroundRun() -> Generation? {
        beginRun(waiters: [])
    }

    /// Creates a load with `waiters` (requires `execution == nil`). Returns its generation if it
    /// may start now, `nil` if it must wait for a zombie body to return.
    @usableFromInline
    mutating func beginRun(waiters: [Entry]) -> Generation? {
        generation &+= 1
        counters.loads += 1
        let canStart = zombieBodies == 0
        execution = Execution(
            generation: generation,
            phase: canStart ? .running : .pendingStart,
            flight: SingleFlight(waiters: waiters),
            restartPending: false
        )
        return canStart ? generation : nil
    }

    /// Replaces `old` (already taken out of `execution`) by a fresh load serving all its waiters.
    private mutating func replaceRun(_ old: Execution) -> Generation {
        let waiters = old.flight.allWaiters()
        // No body is active here (the old body just returned, or the old load was in backoff).
        generation &+= 1
        counters.loads += 1
        execution = Execution(
            generation: generation,
            phase: .running,
            flight: SingleFlight(waiters: waiters),
            restartPending: false
        )
        return generation
    }
}
