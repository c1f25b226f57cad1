import CoreMetrics

/// The swift-metrics objects of one ``MonoTask`` or ``KeyedMonoTask`` created with a
/// `metricsLabel`, made once, in the initialiser.
///
/// Every metric carries the dimension `("name", label)` first. The handlers are the bootstrapped
/// `MetricsSystem`'s, so they are user code: TaskKit calls them only after releasing its lock.
@usableFromInline
final class MonoTaskMetrics: Sendable {
    /// `taskkit_monotask_requests`, `outcome` = `hit`: answered from the cache.
    let hits: Counter
    /// `taskkit_monotask_requests`, `outcome` = `merged`: joined a load that another call started.
    let merged: Counter
    /// `taskkit_monotask_requests`, `outcome` = `loaded`: started a load.
    let loaded: Counter
    /// `taskkit_monotask_requests`, `outcome` = `negative_hit`: answered with a kept failure.
    let negativeHits: Counter
    /// `taskkit_monotask_requests`, `outcome` = `fail_safe`: a failed reload's callers answered
    /// with the expired value (a ``FailSafe``); those calls were counted as `merged` or `loaded`
    /// too.
    let failSafeHits: Counter
    /// `taskkit_monotask_requests`, `outcome` = `soft_timeout`: a caller answered with an expired
    /// value because its reload took longer than the fail-safe's soft timeout (also counted as
    /// `merged` or `loaded`).
    let softTimeouts: Counter
    /// `taskkit_monotask_refreshes_ahead`: background reloads a hit on a value past its refresh
    /// point started (``RefreshAhead``).
    let refreshesAhead: Counter
    /// `taskkit_monotask_load_duration`: one load, from its start to its final outcome.
    let loadDuration: CoreMetrics.Timer
    /// `taskkit_monotask_failures`: loads whose final outcome is a failure.
    let failures: Counter
    /// `taskkit_keyed_evictions` (``KeyedMonoTask`` only): cached values evicted by a bound.
    let evictions: Counter?
    /// `taskkit_keyed_removals` (``KeyedMonoTask`` only), by `cause`: values that left the cache
    /// (`expired`, `evicted_size`, `evicted_cost`, `invalidated`, `replaced`), in that order.
    let removals: [Counter]?
    /// `taskkit_keyed_batches` (``KeyedMonoTask`` only): calls of a batch loader (retries not
    /// counted).
    let batches: Counter?
    /// `taskkit_keyed_batch_keys` (``KeyedMonoTask`` only): the number of keys of each batch.
    let batchKeys: Recorder?

    init(label: String, keyed: Bool) {
        let name = ("name", label)
        hits = Counter(label: "taskkit_monotask_requests", dimensions: [name, ("outcome", "hit")])
        merged = Counter(label: "taskkit_monotask_requests", dimensions: [name, ("outcome", "merged")])
        loaded = Counter(label: "taskkit_monotask_requests", dimensions: [name, ("outcome", "loaded")])
        negativeHits = Counter(label: "taskkit_monotask_requests", dimensions: [name, ("outcome", "negative_hit")])
        failSafeHits = Counter(label: "taskkit_monotask_requests", dimensions: [name, ("outcome", "fail_safe")])
        softTimeouts = Counter(label: "taskkit_monotask_requests", dimensions: [name, ("outcome", "soft_timeout")])
        refreshesAhead = Counter(label: "taskkit_monotask_refreshes_ahead", dimensions: [name])
        loadDuration = CoreMetrics.Timer(label: "taskkit_monotask_load_duration", dimensions: [name])
        failures = Counter(label: "taskkit_monotask_failures", dimensions: [name])
        evictions = keyed ? Counter(label: "taskkit_keyed_evictions", dimensions: [name]) : nil
        removals =
            keyed
            ? [.expired, .evictedForSize, .evictedForCost, .invalidated, .replaced].map {
                (cause: KeyedMonoTaskRemovalCause) in
                Counter(label: "taskkit_keyed_removals", dimensions: [name, ("cause", cause.description)])
            } : nil
        batches = keyed ? Counter(label: "taskkit_keyed_batches", dimensions: [name]) : nil
        batchKeys = keyed ? Recorder(label: "taskkit_keyed_batch_keys", dimensions: [name]) : nil
    }

    /// Counts a request answered from the cache. Not inlinable: the inlined hit paths of
    /// ``MonoTask`` and ``KeyedMonoTask`` keep one call here, so they stay small enough to be
    /// inlined into their callers.
    @usableFromInline
    func recordHit() {
        hits.increment()
    }

    /// Counts a request answered with a kept failure (negative caching).
    @usableFromInline
    func recordNegativeHit() {
        negativeHits.increment()
    }

    /// Counts `count` callers of a failed reload answered with the expired value (fail-safe).
    @usableFromInline
    func recordFailSafeHits(_ count: Int) {
        if count > 0 { failSafeHits.increment(by: count) }
    }

    /// Counts a caller answered with an expired value at its soft timeout.
    func recordSoftTimeout() {
        softTimeouts.increment()
    }

    /// Counts a background reload started by a hit past its refresh point.
    @usableFromInline
    func recordRefreshAhead() {
        refreshesAhead.increment()
    }

    /// Counts `count` requests answered from the cache (``KeyedMonoTask/values(for:)``).
    @usableFromInline
    func recordHits(_ count: Int) {
        hits.increment(by: count)
    }

    /// Counts a batch of `keys` keys.
    @usableFromInline
    func recordBatch(keys: Int) {
        batches?.increment()
        batchKeys?.record(keys)
    }

    /// Counts a request that did not hit the cache: `started` when it started a load.
    func recordMiss(started: Bool) {
        (started ? loaded : merged).increment()
    }

    /// Records the end of a load that lasted `duration` with its final `result`.
    @usableFromInline
    func recordRun<Value>(duration: Duration, result: Result<Value, any Error>) {
        loadDuration.record(duration)
        if case .failure = result { failures.increment() }
    }
}

/// The swift-metrics objects of one ``TaskManager`` created with a `metricsLabel`, made once, in
/// the initialiser. Handlers are called only after the manager's lock is released.
final class TaskManagerMetrics: Sendable {
    /// `taskkit_taskmanager_tasks` by `outcome`.
    let succeeded: Counter
    let failed: Counter
    let cancelled: Counter
    let timedOut: Counter
    let discarded: Counter
    /// `taskkit_taskmanager_running`: tasks executing now.
    let running: Meter
    /// `taskkit_taskmanager_queued`: started tasks that are not executing and not finished.
    let queued: Meter
    /// `taskkit_taskmanager_task_duration`: one execution (adapters and `execute()`).
    let taskDuration: CoreMetrics.Timer

    /// Starts measuring on the manager's clock; the returned closure reads the elapsed time.
    let stopwatch: @Sendable () -> @Sendable () -> Duration

    init(label: String, clock: any Clock<Duration>) {
        stopwatch = { startStopwatch(on: clock) }
        let name = ("name", label)
        func tasks(_ outcome: String) -> Counter {
            Counter(label: "taskkit_taskmanager_tasks", dimensions: [name, ("outcome", outcome)])
        }
        succeeded = tasks("succeeded")
        failed = tasks("failed")
        cancelled = tasks("cancelled")
        timedOut = tasks("timed_out")
        discarded = tasks("discarded")
        running = Meter(label: "taskkit_taskmanager_running", dimensions: [name])
        queued = Meter(label: "taskkit_taskmanager_queued", dimensions: [name])
        taskDuration = CoreMetrics.Timer(label: "taskkit_taskmanager_task_duration", dimensions: [name])
    }

    /// The `taskkit_taskmanager_tasks` counter for a task the manager ended.
    func counter<Payload, Job>(for reason: TaskManagerStateMachine<Payload, Job>.Termination) -> Counter {
        switch reason {
        case .cancelled: return cancelled
        case .timedOut: return timedOut
        case .discarded: return discarded
        case .reactorFailed, .reactorTimedOut: return failed
        }
    }

    /// Applies the changes of the running and queued counts (computed under the lock, applied
    /// after it): increments and decrements commute, so concurrent callers leave exact totals.
    func apply(runningDelta: Int, queuedDelta: Int) {
        Self.apply(runningDelta, to: running)
        Self.apply(queuedDelta, to: queued)
    }

    private static func apply(_ delta: Int, to meter: Meter) {
        if delta > 0 {
            meter.increment(by: Double(delta))
        } else if delta < 0 {
            meter.decrement(by: Double(-delta))
        }
    }
}

extension CoreMetrics.Timer {
    /// Records `duration` in nanoseconds (saturating).
    package func record(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        recordNanoseconds(overflow ? Int64.max : scaled &+ attoseconds / 1_000_000_000)
    }
}

/// Starts measuring on `clock`: the returned closure reads the time elapsed since this call.
package func startStopwatch(on clock: any Clock<Duration>) -> @Sendable () -> Duration {
    stopwatch(clock)
}

private func stopwatch<C: Clock<Duration>>(_ clock: C) -> @Sendable () -> Duration {
    let start = clock.now
    return { start.duration(to: clock.now) }
}
