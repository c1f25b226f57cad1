import CoreMetrics
import Foundation
import Logging

/// Runs one expensive operation at most once at a time, caches its success for a while, and
/// retries its failures with backoff.
///
/// Every caller asks the same `MonoTask` for "the" result:
/// - **Merging.** Callers arriving while a load is in progress join it; they all receive the same
///   result (callbacks in registration order). Only one task block runs at a time, ever.
/// - **Caching.** A success is cached for `resultExpireDuration`, counted from its completion;
///   calls inside that window return it without executing. Failures are never cached. `.zero`
///   caches nothing (calls still merge); `nil` caches until cleared.
/// - **Retrying.** A failed attempt is retried as the ``RetryCount`` says, waiting on the
///   injected clock; waiters only ever see the final outcome.
/// - **Cache control.** ``clearResult(ongoingExecutionStrategy:restartWhenIdle:)`` drops the
///   cached value and decides what happens to a load in progress.
///
/// ```swift
/// let profile = MonoTask<String>(resultExpireDuration: .seconds(60)) {
///     do { return .success(try await api.fetchProfile()) } catch { return .failure(error) }
/// }
/// let first = await profile.asyncExecute()   // runs the block
/// let second = await profile.asyncExecute()  // cached: returns at once, without suspending
/// ```
///
/// Threading: all state lives in one lock; task blocks, callbacks and continuation resumptions
/// never run while it is held. Callback results are delivered on `callbackQueue`; async callers
/// are resumed directly from the thread that completes the load, and a cache hit through
/// ``asyncExecute(forceUpdate:)`` returns on the caller's own executor without suspending.
///
/// A `MonoTask` that is released while a load is in progress stays alive until the load ends and
/// delivers to every waiter.
public final class MonoTask<TaskResult: Sendable>: Sendable {
    /// Receives the result of an execution.
    public typealias ResultCallback = @Sendable (Result<TaskResult, any Error>) -> Void
    /// A callback-based task block: do the work, then call the callback once with the outcome.
    /// Later calls of the same callback are ignored.
    public typealias CallbackExecution = @Sendable (@escaping ResultCallback) -> Void
    /// An async task block returning the outcome. It runs in a `Task` that is cancelled by
    /// `clearResult(ongoingExecutionStrategy: .cancel)`.
    public typealias AsyncExecution = @Sendable () async -> Result<TaskResult, any Error>

    enum Body: Sendable {
        case callback(CallbackExecution, DispatchQueue)
        case async(AsyncExecution)
    }

    @usableFromInline typealias Continuation = MonoContinuation<TaskResult>
    @usableFromInline typealias Waiter = MonoWaiter<TaskResult>

    @usableFromInline typealias Machine = MonoTaskStateMachine<TaskResult, Waiter>

    @usableFromInline
    struct State {
        @usableFromInline var machine: Machine
        /// The `Task` of the current load, kept so `clearResult(.cancel)` can cancel it.
        var runTask: (generation: UInt64, task: Task<Void, any Error>)?
    }

    @usableFromInline let state: LockedState<State>
    @usableFromInline let time: any MonoTaskTimeSource
    private let body: Body
    /// A loaded value's own time to live; `nil` (every value lives `resultExpireDuration`) without.
    private let expiry: (@Sendable (TaskResult) -> Duration?)?
    /// How long a failed load's error is kept (negative caching); `nil` (never kept) without.
    private let failureExpiry: (@Sendable (any Error) -> Duration?)?
    /// The fail-safe's soft timeout (``FailSafe/softTimeout``); `nil` without.
    private let softTimeout: Duration?
    private let callbackQueue: DispatchQueue
    private let logger: Logger
    /// `false` when freshness never depends on time (an infinite time to live, or zero, with no
    /// refresh): callers skip the clock.
    @usableFromInline let hitsReadTheClock: Bool
    /// The metric objects, with a `metricsLabel`; `nil` (no metric objects) without.
    @usableFromInline let metrics: MonoTaskMetrics?
    /// The tracing seam, with a `tracing:` other than `.none`; `nil` (no span, no context) without.
    let tracer: (any TaskTracer)?

    // MARK: Initialisers

    /// Creates a task around a callback-based block.
    ///
    /// - Parameters:
    ///   - retry: How failed attempts are retried. Default: no retry.
    ///   - resultExpireDuration: How long a success stays cached, counted from its completion.
    ///     `.zero` (default) caches nothing: concurrent callers still share a load; `nil` caches
    ///     until cleared. Must not be negative.
    ///   - refreshAhead: Refresh ahead: once a cached value is past this point of its life (a
    ///     ``RefreshAhead/fraction(_:)`` of its time to live, or an ``RefreshAhead/age(_:)``), a
    ///     call returns it at once *and* starts one background refresh (counted as
    ///     ``MonoTaskCounters/refreshesAhead``). `nil` (default) disables it. An age must be
    ///     smaller than a non-zero `resultExpireDuration`.
    ///   - expiryJitter: Spreads expiries: each stored value's time to live is shortened by a random
    ///     duration between zero and this (never below zero), so that values loaded together do
    ///     not all expire, and reload, at the same instant. Must not be negative. `.zero`
    ///     (default): no jitter.
    ///   - failSafe: When the cached value has expired and its reload fails (after its retries),
    ///     the callers get the expired value instead of the error, which is then served as fresh
    ///     for the fail-safe's throttle, up to its maximum staleness past the value's expiry (see
    ///     ``FailSafe``; counted as ``MonoTaskCounters/failSafeHits``, logged at `warning`).
    ///     `nil` (default): the callers get the error.
    ///   - taskQueue: The queue on which `task` is called.
    ///   - callbackQueue: The queue on which ``execute(forceUpdate:then:)`` handlers are called.
    ///   - clock: The clock for the cache's time to live and the retry backoff. Default:
    ///     `ContinuousClock()`.
    ///   - logger: Receives debug messages about loads, retries and cancellations. Default: silent.
    ///   - metricsLabel: With a label, the task reports through the bootstrapped swift-metrics
    ///     `MetricsSystem` with the dimension `("name", metricsLabel)`: `taskkit_monotask_requests`
    ///     (`outcome`: `hit`, `merged`, `loaded`), `taskkit_monotask_load_duration` and
    ///     `taskkit_monotask_failures` (see <doc:RunningOnAServer>). `nil` (default): no metric
    ///     objects, no cost.
    ///   - tracing: With a tracer (`.distributedTracing` from `TaskKitTracing`), each load (its
    ///     attempts and retries) is one span, `MonoTask.execute`, whose parent is the span active
    ///     where the call that started the load was made, with the attribute
    ///     `taskkit.monotask.callers` (see <doc:RunningOnAServer>). ``TaskTracing/none``
    ///     (default): no span, no cost.
    ///   - expiry: The time to live of a loaded value, decided by the value (a token's lifetime,
    ///     an HTTP response's `Cache-Control: max-age`): it replaces `resultExpireDuration` for
    ///     that value; `nil` from it means `resultExpireDuration`, and a negative duration counts
    ///     as zero (the value is delivered, not cached). Called once per successful load, never
    ///     under a lock. `nil` (default): every value lives `resultExpireDuration`.
    ///   - failureExpiry: Negative caching: how long a failed load's error is kept as the answer
    ///     (an upstream's "not found", say); callers within that time get the error at once,
    ///     without a load (counted as ``MonoTaskCounters/negativeHits``), and the first after it
    ///     loads again. `nil` from it (or zero or less) keeps nothing; a `CancellationError` is
    ///     never kept. A success, `clearResult` and a forced call end it. Called once per failed
    ///     load (after its retries), never under a lock. `nil` (default): no failure is kept.
    ///   - task: The work. It must call its callback once; later calls are ignored.
    public convenience init(
        retry: RetryCount = .never,
        resultExpireDuration: Duration? = .zero,
        refreshAhead: RefreshAhead? = nil,
        expiryJitter: Duration = .zero,
        failSafe: FailSafe? = nil,
        taskQueue: DispatchQueue = .global(),
        callbackQueue: DispatchQueue = .global(),
        clock: some Clock<Duration> = ContinuousClock(),
        logger: Logger = .silent(label: "TaskKit.MonoTask"),
        metricsLabel: String? = nil,
        tracing: TaskTracing = .none,
        expiry: (@Sendable (TaskResult) -> Duration?)? = nil,
        failureExpiry: (@Sendable (any Error) -> Duration?)? = nil,
        task: @escaping CallbackExecution
    ) {
        self.init(
            retry: retry, resultExpireDuration: resultExpireDuration, refreshAhead: refreshAhead, expiryJitter: expiryJitter, failSafe: failSafe,
            callbackQueue: callbackQueue, clock: clock, logger: logger, metricsLabel: metricsLabel,
            tracing: tracing, expiry: expiry, failureExpiry: failureExpiry, body: .callback(task, taskQueue)
        )
    }

    /// Creates a task around an async block.
    ///
    /// - Parameters:
    ///   - retry: How failed attempts are retried. Default: no retry.
    ///   - resultExpireDuration: How long a success stays cached; `.zero` (default) caches
    ///     nothing, `nil` caches until cleared.
    ///   - refreshAhead: When a hit starts a background refresh (``RefreshAhead``), or `nil`
    ///     (default) for never. See the callback initialiser.
    ///   - expiryJitter: The most each stored value's time to live is shortened at random;
    ///     `.zero` (default): none. See the callback initialiser.
    ///   - failSafe: An expired value answers for a failed reload (``FailSafe``); `nil` (default):
    ///     the callers get the error. See the callback initialiser.
    ///   - callbackQueue: The queue on which ``execute(forceUpdate:then:)`` handlers are called.
    ///   - clock: The clock for the cache's time to live and the retry backoff. Default:
    ///     `ContinuousClock()`.
    ///   - logger: Receives debug messages about loads, retries and cancellations. Default: silent.
    ///   - metricsLabel: Reports through swift-metrics under this name; `nil` (default): no
    ///     metrics. See the callback initialiser.
    ///   - tracing: Reports a span per load; ``TaskTracing/none`` (default): none. See the callback
    ///     initialiser.
    ///   - expiry: A loaded value's own time to live, replacing `resultExpireDuration` for it
    ///     (`nil` from it: `resultExpireDuration`); `nil` (default): none. See the callback
    ///     initialiser.
    ///   - failureExpiry: How long a failed load's error is kept as the answer (negative
    ///     caching); `nil` (default): none. See the callback initialiser.
    ///   - task: The work, returning its outcome. Cancelled by `clearResult(.cancel)`.
    public convenience init(
        retry: RetryCount = .never,
        resultExpireDuration: Duration? = .zero,
        refreshAhead: RefreshAhead? = nil,
        expiryJitter: Duration = .zero,
        failSafe: FailSafe? = nil,
        callbackQueue: DispatchQueue = .global(),
        clock: some Clock<Duration> = ContinuousClock(),
        logger: Logger = .silent(label: "TaskKit.MonoTask"),
        metricsLabel: String? = nil,
        tracing: TaskTracing = .none,
        expiry: (@Sendable (TaskResult) -> Duration?)? = nil,
        failureExpiry: (@Sendable (any Error) -> Duration?)? = nil,
        task: @escaping AsyncExecution
    ) {
        self.init(
            retry: retry, resultExpireDuration: resultExpireDuration, refreshAhead: refreshAhead, expiryJitter: expiryJitter, failSafe: failSafe,
            callbackQueue: callbackQueue, clock: clock, logger: logger, metricsLabel: metricsLabel,
            tracing: tracing, expiry: expiry, failureExpiry: failureExpiry, body: .async(task)
        )
    }

    /// The initialiser every other one forwards to (the public ones here, the compatibility
    /// spellings in `Compatibility.swift`), with the task block as a `Body`.
    init(
        retry: RetryCount, resultExpireDuration: Duration?, refreshAhead: RefreshAhead?, expiryJitter: Duration = .zero,
        failSafe: FailSafe? = nil,
        callbackQueue: DispatchQueue, clock: some Clock<Duration>, logger: Logger, metricsLabel: String?,
        tracing: TaskTracing, expiry: (@Sendable (TaskResult) -> Duration?)? = nil,
        failureExpiry: (@Sendable (any Error) -> Duration?)? = nil, body: Body
    ) {
        self.state = LockedState(
            State(machine: Machine(configuration: Self.configuration(retry, resultExpireDuration, refreshAhead, expiryJitter, failSafe)))
        )
        self.time = ClockTimeSource(clock)
        self.hitsReadTheClock =
            (resultExpireDuration != nil && resultExpireDuration != .zero) || refreshAhead != nil || expiry != nil
            || failureExpiry != nil
        self.body = body
        self.expiry = expiry
        self.failureExpiry = failureExpiry
        self.softTimeout = failSafe?.softTimeout
        self.callbackQueue = callbackQueue
        self.logger = logger
        self.metrics = metricsLabel.map { MonoTaskMetrics(label: $0, keyed: false) }
        self.tracer = tracing.tracer
    }

    private static func configuration(
        _ retry: RetryCount, _ resultExpireDuration: Duration?, _ refreshAhead: RefreshAhead?, _ expiryJitter: Duration,
        _ failSafe: FailSafe?
    ) -> Machine.Configuration {
        precondition(expiryJitter >= .zero, "MonoTask: expiryJitter must be >= .zero, got \(expiryJitter)")
        if let resultExpireDuration {
            precondition(
                resultExpireDuration >= .zero,
                "MonoTask: resultExpireDuration must be >= .zero (or nil), got \(resultExpireDuration)"
            )
        }
        if case .age(let age)? = refreshAhead?.point, let resultExpireDuration, resultExpireDuration > .zero {
            precondition(
                age < resultExpireDuration,
                "MonoTask: refreshAhead's age must be < resultExpireDuration (\(resultExpireDuration)), got \(age)"
            )
        }
        _ = retry.maximumRetries  // rejects a negative count with its own message
        return Machine.Configuration(
            timeToLive: resultExpireDuration, refreshAhead: refreshAhead, retry: retry, failSafe: failSafe,
            expiryJitter: expiryJitter
        )
    }

    // MARK: Executing

    /// Starts an execution if needed, without waiting for its result (fire-and-forget).
    ///
    /// Joins a load in progress, or does nothing when a fresh value is cached. Useful to warm the
    /// cache.
    ///
    /// - Parameter forceUpdate: Ignore the cached value; when a load is in progress, request a
    ///   fresh load after it.
    public func justExecute(forceUpdate: Bool = false) {
        execute(forceUpdate: forceUpdate, then: nil)
    }

    /// Executes (or joins, or reads the cache) and calls `completionHandler` on `callbackQueue`
    /// with the result.
    ///
    /// - Parameters:
    ///   - forceUpdate: Ignore the cached value and never receive the result of a load that began
    ///     before this call: when one is in progress, a fresh load follows it (never beside it)
    ///     and this handler receives the fresh result. A failed forced load leaves the previously
    ///     cached value in place.
    ///   - completionHandler: Called exactly once on `callbackQueue`, or `nil` for none.
    public func execute(forceUpdate: Bool = false, then completionHandler: ResultCallback?) {
        let now = time.now()
        let (id, action) = state.withLock { state in
            let id = state.machine.makeWaiterID()
            return (
                id,
                state.machine.execute(
                    waiter: completionHandler.map { .callback($0) }, id: id, forceUpdate: forceUpdate, now: now
                )
            )
        }
        if let metrics { metrics.record(action) }
        switch action {
        case .deliverCached(let value, let startRun):
            if let completionHandler {
                callbackQueue.async { completionHandler(.success(value)) }
            }
            if let startRun { startRefreshAhead(startRun) }
        case .deliverFailure(let error):
            if let completionHandler {
                callbackQueue.async { completionHandler(.failure(error)) }
            }
        case .enqueued(let startRun, let softTimeout):
            if let startRun { self.startRun(startRun) }
            if softTimeout { armSoftTimeout(id: id) }
        case .callerCancelled:
            preconditionFailure("a callback caller is never reported as cancelled")
        }
    }

    /// Executes (or joins, or reads the cache) and returns the result.
    ///
    /// A cache hit returns without suspending and without allocating. Otherwise the caller waits
    /// for the load's final outcome. If the calling `Task` is cancelled while waiting, this returns
    /// `.failure(CancellationError())` at once; the load goes on for the other waiters and its
    /// success is still cached.
    ///
    /// Runs on the caller's executor (`nonisolated(nonsending)`): no executor hop on entry.
    ///
    /// - Parameter forceUpdate: See ``execute(forceUpdate:then:)``.
    /// - Returns: The outcome; `.failure(MonoTask.Errors.executionCancelledDueToClearResult)` if
    ///   the load was cancelled by ``clearResult(ongoingExecutionStrategy:restartWhenIdle:)``.
    @inlinable
    @discardableResult
    nonisolated(nonsending)
    public func asyncExecute(forceUpdate: Bool = false) async -> Result<TaskResult, any Error> {
        // On a miss the time is read again before registering, so `.zero` here is harmless.
        let now = hitsReadTheClock ? time.now() : .zero
        let fast = state.withLock { $0.machine.fastPath(forceUpdate: forceUpdate, now: now) }
        switch fast {
        case .hit(let value, let startRun):
            metrics?.recordHit()
            if let startRun { startRefreshAhead(startRun) }
            return .success(value)
        case .miss(let id):
            return await wait(id: id, forceUpdate: forceUpdate)
        }
    }

    /// Executes (or joins, or reads the cache) and returns the value or throws the failure.
    ///
    /// Same semantics as ``asyncExecute(forceUpdate:)``.
    ///
    /// - Parameter forceUpdate: See ``execute(forceUpdate:then:)``.
    /// - Throws: The task block's final error, `CancellationError` when the calling `Task` is
    ///   cancelled, or ``Errors/executionCancelledDueToClearResult``.
    @inlinable
    @discardableResult
    nonisolated(nonsending)
    public func executeThrows(forceUpdate: Bool = false) async throws -> TaskResult {
        try await asyncExecute(forceUpdate: forceUpdate).get()
    }

    @inlinable
    nonisolated(nonsending)
    func wait(id: UInt64, forceUpdate: Bool) async -> Result<TaskResult, any Error> {
        await withTaskCancellationHandler {
            await withMonoContinuation { (continuation: Continuation) in
                // An unchecked continuation (release builds) is sound here: it is either resumed
                // right below, or stored in the state machine, whose rules hand every stored
                // waiter back exactly once (final delivery, clearResult(.cancel) or cancelWaiter).
                let now = hitsReadTheClock ? time.now() : .zero
                let action = state.withLock { state in
                    state.machine.execute(
                        waiter: .async(continuation), id: id, forceUpdate: forceUpdate, now: now,
                        callerCancelled: Task.isCancelled
                    )
                }
                if let metrics { metrics.record(action) }
                switch action {
                case .deliverCached(let value, let startRun):
                    continuation.resume(returning: .success(value))
                    if let startRun { self.startRefreshAhead(startRun) }
                case .deliverFailure(let error):
                    continuation.resume(returning: .failure(error))
                case .enqueued(let startRun, let softTimeout):
                    if let startRun { self.startRun(startRun) }
                    if softTimeout { armSoftTimeout(id: id) }
                case .callerCancelled:
                    continuation.resume(returning: .failure(CancellationError()))
                }
            }
        } onCancel: {
            // Runs after the task's cancelled flag is set. If the waiter is not stored yet, the
            // registration above reads that flag under the same lock and fails the caller itself.
            let waiter = state.withLock { $0.machine.cancelWaiter(id) }
            if case .async(let continuation)? = waiter {
                continuation.resume(returning: .failure(CancellationError()))
            }
        }
    }

    // MARK: State

    /// The cached value if one exists and is within its time to live; never starts a load.
    public var currentResult: TaskResult? {
        let now = time.now()
        return state.withLock { $0.machine.currentValue(now: now) }
    }

    /// Whether a load is in progress: attempting, waiting between retries, or about to start.
    public var isExecuting: Bool {
        state.withLock { $0.machine.isExecuting }
    }

    /// A consistent snapshot of this task's counters.
    public var counters: MonoTaskCounters {
        state.withLock { $0.machine.counters }
    }

    // MARK: Cache control

    /// Puts `value` as the cached value, as if a load had just returned it (a write-through after
    /// an update): it replaces the cached value, with its time to live (`expiry`, if given, is
    /// asked about it on the calling thread, before any lock) and refresh point, and ends a kept
    /// failure and a fail-safe. A load in progress still delivers its result to the callers
    /// waiting for it, but does not store it over this one. Nothing is cached when a loaded value
    /// would not be (a `resultExpireDuration` of `.zero` and no `expiry`).
    public func put(_ value: TaskResult) {
        let expiresIn = expiry?(value)
        let now = time.now()
        let replaced = state.withLock { $0.machine.put(value, expiresIn: expiresIn, now: now) }
        withExtendedLifetime(replaced) {}  // its deinit is user code: after the lock
    }

    /// Drops the cached value and decides what happens to a load in progress.
    ///
    /// - Parameters:
    ///   - ongoingExecutionStrategy: What to do with a load in progress (see
    ///     ``OngoingExecutionStrategy``). Default: ``OngoingExecutionStrategy/allowCompletion``.
    ///   - restartWhenIdle: When no load is in progress, start a fresh one at once that later
    ///     callers join (``isExecuting`` is `true` during it). Ignored when a load is in progress.
    public func clearResult(
        ongoingExecutionStrategy: OngoingExecutionStrategy = .allowCompletion,
        restartWhenIdle: Bool = false
    ) {
        let (action, cancelledTask) = state.withLock { state -> (Machine.ClearAction, Task<Void, any Error>?) in
            let action = state.machine.clearResult(
                strategy: ongoingExecutionStrategy, restartWhenIdle: restartWhenIdle
            )
            switch action {
            case .none, .startRun(_, cancelRun: nil), .failWaiters(_, cancelRun: nil):
                return (action, nil)
            case .startRun(_, cancelRun: let cancelled?), .failWaiters(_, cancelRun: let cancelled?):
                return (action, state.takeRunTask(generation: cancelled))
            }
        }
        cancelledTask?.cancel()
        switch action {
        case .none:
            break
        case .startRun(let generation, _):
            logger.debug("MonoTask: clearResult starts load \(generation)")
            startRun(generation)
        case .failWaiters(let waiters, _):
            logger.debug("MonoTask: clearResult cancelled the load in progress (\(waiters.count) waiters)")
            deliver(.failure(Errors.executionCancelledDueToClearResult), to: waiters)
        }
    }

    // MARK: Running

    /// Starts the background load `generation` a hit on a value past its refresh point began
    /// (the only loads a hit starts), counting it.
    @usableFromInline
    func startRefreshAhead(_ generation: UInt64) {
        metrics?.recordRefreshAhead()
        startRun(generation)
    }

    /// Starts the `Task` of load `generation`. It holds `self` strongly until the load ends.
    ///
    /// - Parameter byCaller: Whether a call of the user's started the load (its span is then the
    ///   parent of the load's); `false` for the follow-up loads a load starts.
    @usableFromInline
    func startRun(_ generation: UInt64, byCaller: Bool = true) {
        logger.debug("MonoTask: load \(generation) starts")
        // Throwing operations that throw nothing: a `Task<Void, Never>` wraps its operation in a
        // thunk, one more allocation per load (see `AnyTaskBox.publishExecution`).
        let task: Task<Void, any Error>
        if let tracer {
            let parent = byCaller ? tracer.currentContext() : nil
            task = Task.detached { () async throws -> Void in
                await tracer.withInternalSpan("MonoTask.execute", parent: parent) { span in
                    await self.run(generation, span: TracedRun(span: span))
                }
            }
        } else {
            task = Task.detached { () async throws -> Void in await self.run(generation, span: UntracedRun()) }
        }
        let stale = state.withLock { state -> Bool in
            guard state.machine.isLive(generation) else { return true }
            state.runTask = (generation, task)
            return false
        }
        // Cancelled (or already over) before its handle was stored: cancel it ourselves.
        if stale { task.cancel() }
    }

    /// Answers waiter `id` with the expired value the fail-safe keeps if the load has not
    /// answered within the soft timeout (the machine said one applies when it registered): a
    /// detached task sleeps on the clock, then asks the machine, which hands the waiter out once.
    @usableFromInline
    func armSoftTimeout(id: UInt64) {
        guard let softTimeout else { return }
        Task.detached { () async throws -> Void in
            try? await self.time.sleep(for: softTimeout)
            let now = self.time.now()
            guard let (waiter, value) = self.state.withLock({ $0.machine.softTimeoutEnded(id: id, now: now) }) else {
                return
            }
            self.metrics?.recordSoftTimeout()
            self.logger.debug("MonoTask: soft timeout, the expired value answers")
            self.deliver(.success(value), to: [waiter])
        }
    }

    /// Runs the attempts of load `generation`, reporting retries and the outcome to `span`.
    private func run(_ generation: UInt64, span: some RunSpan) async {
        let started = metrics == nil ? Duration.zero : time.now()
        while true {
            // A load cancelled before its first attempt skips the body but still reports, so the
            // state machine's count of active bodies stays exact.
            let result: Result<TaskResult, any Error> =
                Task.isCancelled ? .failure(CancellationError()) : await attempt()
            // The value's own time to live, or how long to keep a failure, outside the lock
            // (`expiry` and `failureExpiry` are user code).
            let (expiresIn, failureExpiresIn) = keptFor(result, expiry: expiry, failureExpiry: failureExpiry)
            let now = time.now()
            let action = state.withLock { [expiresIn, failureExpiresIn] state -> Machine.AttemptFinishedAction in
                let action = state.machine.attemptFinished(
                    generation: generation, result: result, expiresIn: expiresIn, failureExpiresIn: failureExpiresIn,
                    now: now
                )
                if !state.machine.isLive(generation), state.runTask?.generation == generation {
                    state.runTask = nil
                }
                return action
            }
            switch action {
            case .none:
                return
            case .retry(let delay):
                span.retried()
                logger.debug("MonoTask: load \(generation) retries after \(delay)")
                if delay > .zero {
                    try? await time.sleep(for: delay)
                }
                let proceed = state.withLock { $0.machine.retryDue(generation: generation) }
                if !proceed { return }
            case .finish(let waiters, let delivered, let next):
                if let metrics {
                    metrics.recordRun(duration: now - started, result: result)
                }
                if case .failure(let error) = result, case .success = delivered {
                    metrics?.recordFailSafeHits(waiters.count)
                    logger.warning(
                        "MonoTask: load failed; the expired value answers instead (fail-safe): \(error)",
                        metadata: ["callers": "\(waiters.count)"]
                    )
                }
                span.finished(delivered, callers: waiters.count)
                deliver(delivered, to: waiters)
                if let next { startRun(next, byCaller: false) }
                return
            case .startRun(let next):
                startRun(next, byCaller: false)
                return
            }
        }
    }

    /// One call of the task block.
    private func attempt() async -> Result<TaskResult, any Error> {
        switch body {
        case .async(let task):
            return await task()
        case .callback(let task, let queue):
            let logger = logger
            let once = OneShot<Result<TaskResult, any Error>, Never>()
            queue.async {
                task { result in
                    if !once.finish(with: .success(result)) {
                        logger.debug("MonoTask: the task block called its callback again; ignored")
                    }
                }
            }
            return await once.value()
        }
    }

    private func deliver(_ result: Result<TaskResult, any Error>, to waiters: [Waiter]) {
        let callbacks = waiters.resumingContinuations(with: result)
        if !callbacks.isEmpty {
            callbackQueue.async { [callbacks] in
                for callback in callbacks { callback(result) }
            }
        }
    }
}

extension MonoTask.State {
    fileprivate mutating func takeRunTask(generation: UInt64) -> Task<Void, any Error>? {
        guard let runTask, runTask.generation == generation else { return nil }
        self.runTask = nil
        return runTask.task
    }
}

extension MonoTaskMetrics {
    /// Counts a request by the action its registration returned.
    @usableFromInline
    func record<Value, Waiter>(_ action: MonoTaskStateMachine<Value, Waiter>.ExecuteAction) {
        switch action {
        case .deliverCached: recordHit()
        case .deliverFailure: recordNegativeHit()
        case .enqueued(let startRun, _): recordMiss(started: startRun != nil)
        case .callerCancelled: break
        }
    }
}
