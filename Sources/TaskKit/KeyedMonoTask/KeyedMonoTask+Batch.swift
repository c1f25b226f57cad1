import Logging

extension KeyedMonoTask {
    /// Creates a cache that loads the values of many keys in one call of `batchLoad`.
    ///
    /// Every key whose load begins in the same moment (any caller of ``value(for:forceUpdate:)``,
    /// ``values(for:)`` or the callback form, and the background refreshes of stale values) goes
    /// to `batchLoad` in one call, split into calls of at most `maximumBatchSize` keys. A key
    /// reaches `batchLoad` once: a key that is cached, or whose load (alone or in a batch) is in
    /// flight, is never asked for again; its callers get the cached value or join that load.
    ///
    /// *When a batch goes.* At once when `maximumBatchSize` keys wait. Otherwise after
    /// `batchWindow` on `clock` (`.zero`, the default, adds no delay) and then as soon as the
    /// tasks that asked have run on: the batch waits while yielding to them lets more keys arrive,
    /// and until no key has arrived for `batchQuietPeriod` (100 µs), so keys asked for by tasks
    /// that run together (a GraphQL resolver's children, a task group) share it, also on a busy
    /// machine. ``values(for:)`` sends all its missing keys in as few calls as
    /// `maximumBatchSize` allows.
    ///
    /// *Results are per key.* The value `batchLoad` returns for a key is that key's result, cached
    /// as a single load's would be. A key it was asked for and leaves out fails with
    /// ``KeyedMonoTaskKeyNotLoaded`` (not cached). A key it returns without being asked is
    /// cached too (unless its own load is in flight). When `batchLoad` throws, the batch's keys
    /// fail with that error (not cached); keys of other batches are not affected. `retry`
    /// retries the whole batch.
    ///
    /// *Context.* A batch runs in a task of its own, detached: none of its callers' task-local
    /// values, tracing context or priority reach it, and none of them cancels it. With tracing,
    /// each batch is one span, `KeyedMonoTask.batchLoad`, with no parent (a batch serves many
    /// callers). Expiry, the bounds, stale-while-revalidate, ``invalidate(_:)``, cancellation of
    /// callers and ``counters`` (with ``KeyedMonoTaskCounters/batches`` and
    /// ``KeyedMonoTaskCounters/batchedKeys``) work as with a loader of one key.
    ///
    /// ```swift
    /// let users = KeyedMonoTask<UserID, User>(maximumEntries: 10_000, maximumBatchSize: 100) { ids in
    ///     try await database.users(ids: ids)  // one query for every id asked for together
    /// }
    /// async let ada = users.value(for: 1)
    /// async let alan = users.value(for: 2)
    /// _ = try await (ada, alan)  // one call of the batch loader, with [1, 2]
    /// ```
    ///
    /// - Parameters:
    ///   - maximumEntries: The most entries held, cached or loading; must be greater than 0.
    ///   - maximumCost: With `cost`, the most total cost of the cached values, as for
    ///     ``init(maximumEntries:maximumCost:resultExpireDuration:staleWhileRevalidate:refreshAhead:expiryJitter:failSafe:retry:clock:logger:metricsLabel:tracing:expiry:failureExpiry:tags:cost:onRemoval:load:)``;
    ///     `nil` (default): no cost bound. Must not be negative; given together with `cost`.
    ///   - resultExpireDuration: How long a success stays fresh, counted from its batch's end.
    ///     As for ``init(maximumEntries:maximumCost:resultExpireDuration:staleWhileRevalidate:refreshAhead:expiryJitter:failSafe:retry:clock:logger:metricsLabel:tracing:expiry:failureExpiry:tags:cost:onRemoval:load:)``.
    ///   - staleWhileRevalidate: As for the loader of one key; the refreshes are batched too.
    ///   - refreshAhead: When a hit starts a background reload of a fresh value (``RefreshAhead``),
    ///     as for the loader of one key; the refreshes are batched too. `nil` (default): never.
    ///   - expiryJitter: The most each stored value's time to live is shortened at random, as for
    ///     the loader of one key. `.zero` (default): none.
    ///   - failSafe: An expired value answers for a failed reload of its key (the batch failed, or
    ///     did not return the key), as for the loader of one key (``FailSafe``). `nil` (default):
    ///     the callers get the error.
    ///   - retry: How a failed batch is retried, as a whole. Default: no retry.
    ///   - maximumBatchSize: The most keys in one call of `batchLoad`; must be greater than 0.
    ///   - batchWindow: How long a batch waits for more keys, on `clock`, before it goes (a full
    ///     batch goes at once). Default `.zero`: no wait beyond letting the asking tasks run on.
    ///     Must not be negative.
    ///   - batchQuietPeriod: Once the asking tasks have yielded twice with no new key, how long
    ///     no new key must have arrived before the batch goes, at most ten times this after the
    ///     batch began waiting. Measured in real time (`ContinuousClock`), not on `clock`: it is
    ///     about when the machine runs the asking tasks, and bridges a worker thread that the
    ///     system preempts on a busy machine (see *When a batch goes*). Default 100 µs; `.zero`:
    ///     the yields alone decide (the least latency for a lone key, more and smaller batches
    ///     on a busy machine). Must not be negative.
    ///   - clock: The clock for expiry, the batch window and the retry backoff.
    ///   - logger: Receives a debug message per failed batch and per retry of a batch. Default:
    ///     silent.
    ///   - metricsLabel: As for the loader of one key; a batch also counts
    ///     `taskkit_keyed_batches` and records its size in `taskkit_keyed_batch_keys`.
    ///   - tracing: As for the loader of one key, with one span per batch (see *Context*).
    ///   - expiry: The time to live of a loaded value, decided by the value; `nil` from it means
    ///     `resultExpireDuration` (as for the loader of one key).
    ///   - failureExpiry: How long a key's failure is kept as its answer (negative caching: a
    ///     ``KeyedMonoTaskKeyNotLoaded`` for a key the loader did not return, say), as for the
    ///     loader of one key.
    ///   - tags: The tags of a loaded value, for ``invalidate(tag:)``, as for the loader of one key.
    ///   - cost: With `maximumCost`, the cost of a loaded value; must not be negative.
    ///   - onRemoval: The removal listener, called with the key, the value and the cause each time a
    ///     cached value leaves the cache, as for the loader of one key. `nil` (default): none.
    ///   - batchLoad: Loads the values of the keys it is given (distinct, at most
    ///     `maximumBatchSize`), returning them by key. Runs in a task of its own, never under a
    ///     lock; a key is in at most one call in flight at a time (except after
    ///     ``invalidate(_:)``).
    public convenience init(
        maximumEntries: Int,
        maximumCost: Int? = nil,
        resultExpireDuration: Duration? = .zero,
        staleWhileRevalidate: Duration = .zero,
        refreshAhead: RefreshAhead? = nil,
        expiryJitter: Duration = .zero,
        failSafe: FailSafe? = nil,
        retry: RetryCount = .never,
        maximumBatchSize: Int,
        batchWindow: Duration = .zero,
        batchQuietPeriod: Duration = .microseconds(100),
        clock: some Clock<Duration> = CoarseContinuousClock(),
        logger: Logger = .silent(label: "TaskKit.KeyedMonoTask"),
        metricsLabel: String? = nil,
        tracing: TaskTracing = .none,
        expiry: (@Sendable (Key, Value) -> Duration?)? = nil,
        failureExpiry: (@Sendable (Key, any Error) -> Duration?)? = nil,
        tags: (@Sendable (Key, Value) -> Set<String>)? = nil,
        cost: (@Sendable (Key, Value) -> Int)? = nil,
        onRemoval: (@Sendable (Key, Value, KeyedMonoTaskRemovalCause) -> Void)? = nil,
        batchLoad: @escaping @Sendable ([Key]) async throws -> [Key: Value]
    ) {
        precondition(maximumBatchSize > 0, "KeyedMonoTask: maximumBatchSize must be > 0, got \(maximumBatchSize)")
        precondition(batchWindow >= .zero, "KeyedMonoTask: batchWindow must be >= .zero, got \(batchWindow)")
        precondition(
            batchQuietPeriod >= .zero, "KeyedMonoTask: batchQuietPeriod must be >= .zero, got \(batchQuietPeriod)"
        )
        _ = retry.maximumRetries  // rejects a negative count with its own message
        let batcher = KeyedMonoTaskBatcher<Key, Value>(
            maximumBatchSize: maximumBatchSize, window: batchWindow, quietPeriod: batchQuietPeriod, retry: retry,
            load: batchLoad
        )
        self.init(
            entries: maximumEntries, costBound: maximumCost, resultExpireDuration: resultExpireDuration,
            staleWhileRevalidate: staleWhileRevalidate, refreshAhead: refreshAhead, expiryJitter: expiryJitter,
            failSafe: failSafe, retry: retry,
            clock: clock, expiry: expiry,
            failureExpiry: failureExpiry, tags: tags, costOf: cost, onRemoval: onRemoval,
            logger: logger, metricsLabel: metricsLabel, tracing: tracing, loader: .batch(batcher)
        )
    }

    @usableFromInline typealias Batcher = KeyedMonoTaskBatcher<Key, Value>

    /// How many times the dispatch task yields, at most, while keys keep arriving (it stops after
    /// two yields in a row that bring none).
    @inlinable static var dispatchYields: Int { 16 }

    /// Does what the batcher decided.
    @inlinable
    func perform(_ action: Batcher.Action, batcher: Batcher) {
        switch action {
        case .none:
            break
        case .scheduleDispatch:
            Task.detached { () async throws -> Void in await self.dispatch(batcher) }
        case .run(let items):
            Task.detached { () async throws -> Void in await self.runBatch(items, batcher: batcher) }
        }
    }

    /// The dispatch task: waits for the window, then while yielding lets more keys arrive, then
    /// loads every waiting key.
    @inlinable
    func dispatch(_ batcher: Batcher) async {
        if batcher.window > .zero {
            // This task is never cancelled, so the sleep ends at its deadline.
            try? await time.sleep(for: batcher.window)
        }
        // Two yields in a row that bring no key: a caller still starting on another core had
        // the time of one more yield to arrive (one quiet yield left a key behind, now and then,
        // on a loaded machine).
        // Then, on a busy machine, a worker the system preempted holds back the callers it has
        // not started while the yields come back quiet: the quiet period (real time) waits for
        // them, up to ten times itself (Benchmarks/NOTES.md, issue 51).
        let quietPeriod = batcher.quietPeriod
        let began = ContinuousClock.now
        var lastArrival = began
        var seen = -1
        var quiet = 0
        var yields = 0
        while yields < Self.dispatchYields {
            let count = batcher.pendingCount
            if count == seen {
                quiet += 1
            } else {
                seen = count
                quiet = 0
                if quietPeriod > .zero { lastArrival = .now }
            }
            if quiet >= 2 {
                guard quietPeriod > .zero else { break }
                let now = ContinuousClock.now
                let idle = now - lastArrival
                if idle >= quietPeriod || now - began >= quietPeriod * 10 { break }
                // Never cancelled: the sleep ends at its deadline.
                try? await Task.sleep(for: quietPeriod - idle)
                continue
            }
            yields += 1
            await Task.yield()
        }
        let batches = batcher.takeAll()
        guard let last = batches.last else { return }
        for batch in batches.dropLast() {
            Task.detached { () async throws -> Void in await self.runBatch(batch, batcher: batcher) }
        }
        await runBatch(last, batcher: batcher)
    }

    /// Loads one batch, in a span of its own with a tracer.
    @inlinable
    func runBatch(_ items: [Batcher.Item], batcher: Batcher) async {
        guard !isTraced else { return await runTracedBatch(items, batcher: batcher) }
        await loadBatch(items, batcher: batcher, span: UntracedRun())
    }

    /// ``runBatch(_:batcher:)`` with a tracer.
    @usableFromInline
    func runTracedBatch(_ items: [Batcher.Item], batcher: Batcher) async {
        guard let tracer else { return }
        await tracer.withInternalSpan("KeyedMonoTask.batchLoad", parent: nil) { span in
            span.setAttribute("taskkit.keyed.batch_keys", items.count)
            await self.loadBatch(items, batcher: batcher, span: TracedRun(span: span))
        }
    }

    /// Calls the batch loader for `items` (retrying the batch as its policy says) and finishes
    /// each key's load with its own result; caches the values returned for keys not asked for.
    @inlinable
    func loadBatch(_ items: [Batcher.Item], batcher: Batcher, span: some RunSpan) async {
        let started: Int64 = metrics == nil ? 0 : time.nowNanoseconds()
        // Distinct keys: a key invalidated while its load waited for the batch, then asked for
        // again, has two loads in it (the detached one and the new one); both get its value.
        // Only a load begun while its shard held detached loads can repeat a key.
        let keys: [Key]
        if items.contains(where: { $0.start.keyMayRepeat }) {
            var seen = Set<Key>(minimumCapacity: items.count)
            keys = items.compactMap { seen.insert($0.start.key).inserted ? $0.start.key : nil }
        } else {
            keys = items.map(\.start.key)
        }
        var schedule = batcher.retry.makeSchedule()
        var generator = SystemRandomNumberGenerator()
        let outcome: Result<[Key: Value], any Error>
        while true {
            do {
                outcome = .success(try await batcher.load(keys))
                break
            } catch {
                guard let delay = schedule.nextDelay(using: &generator) else {
                    outcome = .failure(error)
                    logger.debug("KeyedMonoTask: batch load of \(keys.count) keys failed: \(error)")
                    break
                }
                batcher.recordRetry()
                span.retried()
                logger.debug("KeyedMonoTask: batch load of \(keys.count) keys retries after \(delay)")
                if delay > .zero {
                    // This task is never cancelled, so the sleep ends at its deadline.
                    try? await time.sleep(for: delay)
                }
            }
        }
        if let metrics {
            metrics.recordBatch(keys: items.count)
            metrics.recordRun(
                duration: .nanoseconds(time.nowNanoseconds() &- started), result: outcome.map { _ in () }
            )
        }
        var found = 0  // asked keys the loader returned
        // Each key's result, cost and time to live first, outside every lock (`cost` and
        // `expiry` are user code).
        var results: [(result: Result<Value, any Error>, stored: Storage)] = []
        results.reserveCapacity(items.count)
        var touched: UInt64 = 0  // the shards the batch's keys are in (at most 64)
        for item in items {
            let result: Result<Value, any Error>
            switch outcome {
            case .success(let values):
                if let value = values[item.start.key] {
                    result = .success(value)
                    found += 1
                } else {
                    result = .failure(KeyedMonoTaskKeyNotLoaded(key: item.start.key))
                }
            case .failure(let error):
                result = .failure(error)
            }
            results.append((result, storage(of: result, for: item.start.key)))
            touched |= 1 << UInt64(item.shard)
        }
        let callers = finishKeys(items, results: results, shards: touched, now: time.nowNanoseconds())
        span.finished(outcome, callers: callers)
        // Keys returned without being asked, if more came back than the asked keys found.
        guard case .success(let values) = outcome, values.count > found - (items.count - keys.count) else { return }
        let asked = Set(keys)
        for (key, value) in values where !asked.contains(key) {
            cacheExtra(key: key, value: value)
        }
    }

    /// Ends the loads of a batch's keys, `items[i]` with `results[i]` at `now`, one shard at a
    /// time (`touched`: a bit for each shard holding some of them): each shard's keys in one
    /// critical section, then their deliveries after it. Returns how many callers they served.
    @inlinable
    func finishKeys(
        _ items: [Batcher.Item], results: [(result: Result<Value, any Error>, stored: Storage)],
        shards touched: UInt64,
        now: Int64
    ) -> Int {
        var callers = 0
        var left = touched
        var ended: [Machine.AttemptFinishedAction] = []
        ended.reserveCapacity(items.count)
        while left != 0 {
            let shard = left.trailingZeroBitCount
            left &= left &- 1
            // Last key first: `popLast` below then moves the actions out in the batch's order
            // (iterating the array would copy each action, and destroy it again: ~700
            // instructions a key, through the enum's outlined copy).
            shards.withLock(shard) { machine in
                for index in items.indices.reversed() where items[index].shard == shard {
                    let (result, stored) = results[index]
                    ended.append(
                        machine.attemptFinished(
                            generation: items[index].start.generation, result: result, cost: stored.cost,
                            expiresIn: stored.expiresIn, failureExpiresIn: stored.failureExpiresIn, tags: stored.tags,
                            now: now
                        )
                    )
                }
            }
            var index = -1  // the item of each action: the shard's keys, in the batch's order
            while let action = ended.popLast() {
                index += 1
                while items[index].shard != shard { index += 1 }
                guard case .finish(let waiters, let delivered, let next, let released) = consume action else {
                    // The machine of a batch-loading cache never retries one key.
                    preconditionFailure("KeyedMonoTask: a key of a batch was scheduled for a retry")
                }
                if case .failure(let error) = results[index].result, case .success = delivered {
                    loadFailed(items[index].start.key, error, answered: delivered, callers: waiters.count)
                }
                finish(waiters: waiters, result: delivered, next: next, released: released, in: shard)
                callers += waiters.count
            }
        }
        return callers
    }

    /// Caches `value`, which a batch returned for `key` without being asked.
    @inlinable
    func cacheExtra(key: Key, value: Value) {
        let stored = storage(of: .success(value), for: key)
        let now = time.nowNanoseconds()
        let state = shard(for: key)
        let released = shards.withLock(state) { [stored] in
            $0.cacheExtra(key: key, value: value, cost: stored.cost, expiresIn: stored.expiresIn, tags: stored.tags, now: now)
        }
        withExtendedLifetime(released) {}
        account(released, in: state)
        if released.overBound { restoreBounds(besides: state) }
    }

    /// ``values(for:)`` with a batch loader: registers every key (hits are answered at once),
    /// holding the batcher so that the missing keys go together, then waits for them.
    @usableFromInline
    func batchedValues(
        for keys: some Sequence<Key> & Sendable, batcher: Batcher
    ) async -> [Key: Result<Value, any Error>] {
        var unique: [Key] = []
        var seen = Set<Key>()
        for key in keys where seen.insert(key).inserted { unique.append(key) }
        guard !unique.isEmpty else { return [:] }
        let collector = KeyedMonoTaskCollector<Key, Value>(keys: unique)
        batcher.hold()
        for key in unique {
            value(for: key) { result in collector.deliver(key, result) }
        }
        perform(batcher.release(), batcher: batcher)
        return await collector.results()
    }
}

/// The results of a batched ``KeyedMonoTask/values(for:)`` call, delivered key by key by
/// callbacks, and the one continuation that waits for all of them (or for the call's
/// cancellation, which fails the keys still missing with `CancellationError`).
final class KeyedMonoTaskCollector<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct State {
        var results: [Key: Result<Value, any Error>] = [:]
        var continuation: CheckedContinuation<[Key: Result<Value, any Error>], Never>?
        /// The continuation was resumed (or its call was cancelled before it was stored).
        var done = false
        var cancelled = false
    }

    private let keys: [Key]
    private let state = LockedState(State())

    init(keys: [Key]) {
        self.keys = keys
    }

    /// The result of `key` arrived; resumes the waiting call when it was the last.
    func deliver(_ key: Key, _ result: Result<Value, any Error>) {
        let resume = state.withLock { state -> (CheckedContinuation<[Key: Result<Value, any Error>], Never>, [Key: Result<Value, any Error>])? in
            guard !state.done else { return nil }
            state.results[key] = result
            guard state.results.count == keys.count, let continuation = state.continuation else { return nil }
            state.done = true
            state.continuation = nil
            return (continuation, state.results)
        }
        if let (continuation, results) = resume { continuation.resume(returning: results) }
    }

    /// Waits for every key's result; when the calling task is cancelled, returns at once with
    /// `CancellationError` for the keys still missing.
    func results() async -> [Key: Result<Value, any Error>] {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> [Key: Result<Value, any Error>]? in
                    if state.results.count == keys.count || state.cancelled {
                        state.done = true
                        return filled(state.results)
                    }
                    state.continuation = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let resume = state.withLock { state -> (CheckedContinuation<[Key: Result<Value, any Error>], Never>, [Key: Result<Value, any Error>])? in
                state.cancelled = true
                guard !state.done, let continuation = state.continuation else { return nil }
                state.done = true
                state.continuation = nil
                return (continuation, filled(state.results))
            }
            if let (continuation, results) = resume { continuation.resume(returning: results) }
        }
    }

    /// `results` with `CancellationError` for every key missing from it.
    private func filled(_ results: [Key: Result<Value, any Error>]) -> [Key: Result<Value, any Error>] {
        var all = results
        for key in keys where all[key] == nil { all[key] = .failure(CancellationError()) }
        return all
    }
}
