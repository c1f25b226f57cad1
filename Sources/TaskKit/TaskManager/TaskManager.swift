import Dispatch
import Logging

/// Runs ``ManagedTask``s with handles, delayed starts, deadlines, a concurrency limit,
/// interceptors and reactors, on Swift concurrency (no thread is ever blocked).
///
/// The life of a task added with ``add(task:startImmediately:after:timeout:completeOn:completion:)``:
///
/// 1. **Start**: at once, after its `after:` delay, or when ``TaskHandle/start()`` is called.
///    Its deadline (`timeout:` or ``ManagedTask/timeout``) starts counting then.
/// 2. **Interception**: every ``Interceptor`` sees it, in order, one task at a time; the
///    combined ``InterceptCommand`` executes it, holds it in a batch, or discards it. While a
///    reaction with ``ReactorConfiguration/suspendsTaskQueue`` runs, tasks wait *before*
///    interception.
/// 3. **Execution**: when fewer than `maximumConcurrentTasks` tasks execute and the queue is not
///    suspended, each interceptor's ``Interceptor/adapt(task:)`` runs, then the task's
///    ``ManagedTask/execute()``, in a new Swift task.
/// 4. **Reaction**: every ``Reactor`` is asked whether the result calls for it; matching
///    reactions run (or are joined), after which the task runs again (requeue) or delivers.
/// 5. **Completion**: the caller's completion is called once, on `completeOn` if given, never
///    under a lock.
/// 6. **Release**: once the completion returned, the manager lets go of the task and the
///    completion (their `deinit`s run): at once when it has nothing else to run; while other
///    tasks run, it may keep up to 128 finished ones until the next add, which releases them on
///    the adding thread (where they were allocated: on Linux, glibc's malloc frees memory much
///    faster there).
///
/// Cancelling (``TaskHandle/cancel()``), a passed deadline, a `discard`, or the failure of a
/// reactor that requeued the task end it at any step: ``ManagedTask/didCancel(with:)`` runs,
/// then the completion receives the ``TaskError``; a result arriving later is dropped.
public final class TaskManager: Sendable {
    /// Tasker's process-wide manager: no interceptors, no reactors and no concurrency limit.
    ///
    /// Create a manager where the application starts and pass it to what needs it instead: every
    /// user of a process-wide manager shares its limit and its interceptors, and any of them can
    /// shut it down for all the others.
    @available(*, deprecated, message: "create a TaskManager where the application starts and pass it: any user of a shared manager can shut it down for all")
    public static let shared = TaskManager()

    @usableFromInline let storage: TaskManagerStorage

    /// The interceptors, in the order they see each task.
    public var interceptors: [any Interceptor] { storage.interceptors }

    /// The reactors, in the order they are asked about each result.
    public var reactors: [any Reactor] { storage.reactors }

    /// How long ``shutDown()`` lets started tasks finish before it cancels what remains.
    public let shutdownGracePeriod: Duration

    /// Creates a manager.
    ///
    /// - Parameters:
    ///   - interceptors: see every task before it executes, in this order.
    ///   - reactors: are asked about every result, in this order. Their
    ///     ``Reactor/configuration`` is read once, here.
    ///   - maximumConcurrentTasks: the most tasks executing at once; `nil` (the default) for no limit.
    ///   - shutdownGracePeriod: how long ``shutDown()`` (and a swift-service-lifecycle graceful
    ///     shutdown, with `TaskKitServiceLifecycle`) lets started tasks finish, on `clock`,
    ///     before it cancels what remains. Default: 10 seconds.
    ///   - clock: the clock for `after:` delays, deadlines and reactor timeouts.
    ///   - logger: receives trace and debug messages; silent by default. Whether it receives the
    ///     per-task trace messages is decided from its level when the manager is made.
    ///   - metricsLabel: With a label, the manager reports through the bootstrapped swift-metrics
    ///     `MetricsSystem` with the dimension `("name", metricsLabel)`: `taskkit_taskmanager_tasks`
    ///     (`outcome`: `succeeded`, `failed`, `cancelled`, `timed_out`, `discarded`), the meters
    ///     `taskkit_taskmanager_running` and `taskkit_taskmanager_queued`, and the timer
    ///     `taskkit_taskmanager_task_duration` (one execution, on `clock`); see
    ///     <doc:RunningOnAServer>. `nil` (default): no metric objects, no cost.
    ///   - tracing: With a tracer (`.distributedTracing` from `TaskKitTracing`), each execution of
    ///     a task runs inside a span named after the task's type, whose parent is the span active
    ///     where the task was added; a failed execution sets its error status (see
    ///     <doc:RunningOnAServer>). ``TaskTracing/none`` (default): no span, no cost.
    /// - Precondition: `maximumConcurrentTasks`, when given, is at least 1; `shutdownGracePeriod` is
    ///   not negative.
    public init(
        interceptors: [any Interceptor] = [],
        reactors: [any Reactor] = [],
        maximumConcurrentTasks: Int? = nil,
        shutdownGracePeriod: Duration = .seconds(10),
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger = .silent(label: "TaskKit.TaskManager"),
        metricsLabel: String? = nil,
        tracing: TaskTracing = .none
    ) {
        precondition(
            shutdownGracePeriod >= .zero,
            "TaskManager: shutdownGracePeriod must be >= 0, got \(shutdownGracePeriod)"
        )
        self.shutdownGracePeriod = shutdownGracePeriod
        if let maximumConcurrentTasks {
            precondition(
                maximumConcurrentTasks >= 1,
                "TaskManager: maximumConcurrentTasks must be >= 1 or nil, got \(maximumConcurrentTasks)"
            )
        }
        storage = TaskManagerStorage(
            interceptors: interceptors, reactors: reactors, maximumConcurrentTasks: maximumConcurrentTasks,
            clock: clock, logger: logger,
            metrics: metricsLabel.map { TaskManagerMetrics(label: $0, clock: clock) },
            tracer: tracing.tracer
        )
    }

    /// Adds a task and returns its handle.
    ///
    /// - Parameters:
    ///   - task: the task.
    ///   - startImmediately: when `false`, the task waits for ``TaskHandle/start()`` (and is not
    ///     covered by ``waitTillAllTasksFinished()`` until then).
    ///   - after: a delay, measured on the manager's clock from the start, before the task is
    ///     intercepted and queued. `nil` or zero: none.
    ///   - timeout: the task's deadline from its start (after the delay) to its completion,
    ///     overriding ``ManagedTask/timeout``. When it passes the task ends with
    ///     ``TaskError/timedOut``.
    ///   - completeOn: the queue the completion is called on; `nil` calls it on whichever thread
    ///     finished the task.
    ///   - completion: receives the task's result or error, exactly once.
    /// - Precondition: `after` is not negative; `timeout`, when given, is greater than zero.
    @inlinable
    @discardableResult
    public func add<T: ManagedTask>(
        task: T,
        startImmediately: Bool = true,
        after: Duration? = nil,
        timeout: Duration? = nil,
        completeOn: DispatchQueue? = nil,
        completion: (@Sendable (Result<T.SuccessValue, any Error>) -> Void)? = nil
    ) -> TaskHandle {
        Self.checkTiming(after: after, timeout: timeout, in: "add")
        let box = TaskBox(task: task, timeout: timeout, queue: completeOn, completion: completion) {
            completion, outcome in completion(outcome.result(as: T.SuccessValue.self))
        }
        if startImmediately, (after ?? .zero) == .zero, let (id, execute) = storage.addDirectly(box) {
            if execute { spawnDirectExecution(box: box, id: id) }
            return TaskHandle(identifier: id, storage: storage)
        }
        return storage.add(box, startImmediately: startImmediately, delay: after)
    }

    /// Adds a task, starts it, and returns its result (or throws its error).
    ///
    /// Cancelling the calling Swift task cancels the managed task (its
    /// ``ManagedTask/didCancel(with:)`` receives ``TaskError/cancelled``) and this throws
    /// `CancellationError`, as every `async` API of TaskKit does for a cancelled caller (unless
    /// the task's result was already delivered, which is then returned). A task cancelled by
    /// other means (its handle, an interceptor) throws ``TaskError/cancelled``.
    ///
    /// - Parameters: as for ``add(task:startImmediately:after:timeout:completeOn:completion:)``.
    /// - Throws: the task's error, an adapter's error, a ``TaskError``, or `CancellationError`.
    @inlinable
    public func value<T: ManagedTask>(
        of task: T, after: Duration? = nil, timeout: Duration? = nil
    ) async throws -> T.SuccessValue {
        Self.checkTiming(after: after, timeout: timeout, in: "value(of:)")
        // The caller awaits the box itself: no completion closure, no separate one-shot.
        let box = TaskBox(awaiting: task, timeout: timeout)
        if (after ?? .zero) == .zero, !Task.isCancelled, let (id, execute) = storage.addDirectly(box) {
            if execute { return try await directValue(box: box, id: id) }
            return try await awaitAnswer(of: box, id: id, start: false)
        }
        // A caller that is cancelled already adds the task unstarted: the cancellation handler
        // runs at once and ends it before it can start. Any other caller adds it started, in one
        // lock round trip; a cancellation that comes later cancels it wherever it is.
        let startNow = !Task.isCancelled
        let handle = storage.add(box, startImmediately: startNow, delay: after)
        return try await awaitAnswer(of: box, id: handle.identifier, start: !startNow)
    }

    /// The rest of ``value(of:after:timeout:)`` for a task the manager registered as executing
    /// (``TaskManagerStorage/addDirectly(_:)``): the execution job is spawned here, specialised
    /// for `T`, runs the adapters and the task, and answers the caller with the typed result,
    /// with no action lists between. Ends as the general way does: a cancellation reaches the
    /// task through the manager.
    @inlinable
    func directValue<T: ManagedTask>(box: TaskBox<T>, id: Int) async throws -> T.SuccessValue {
        spawnDirectExecution(box: box, id: id)
        return try await awaitAnswer(of: box, id: id, start: false)
    }

    /// Spawns the execution of task `id`, registered as executing by
    /// ``TaskManagerStorage/addDirectly(_:)``, specialised for `T`: the job runs the adapters and
    /// the task, reports the end to the manager, and when the manager grants the delivery hands
    /// the typed result to the caller (``TaskBox/deliverDirectly(_:reportingTo:)``).
    @inlinable
    func spawnDirectExecution<T: ManagedTask>(box: TaskBox<T>, id: Int) {
        box.directLane = (storage, id)
        // A throwing operation, though it throws nothing: `Task<Void, Never>` wraps a
        // non-throwing one in a thunk, one more allocation per task (see ``AnyTaskBox/publishExecution(_:)``).
        box.publishExecution(Task { () async throws -> Void in await box.executeDirectly() })
    }

    /// Awaits the answer of `box`, the box of task `id`, starting the task first when `start`
    /// (it was added unstarted); a cancellation of the caller cancels the task. Always inlined:
    /// as a function of its own it costs every round trip an async frame (~100 instructions).
    @inlinable @inline(__always)
    func awaitAnswer<T: ManagedTask>(of box: TaskBox<T>, id: Int, start: Bool) async throws -> T.SuccessValue {
        let storage = self.storage
        do {
            return try await withTaskCancellationHandler {
                if start { storage.start(id) }
                return try await box.awaitValue()
            } onCancel: {
                storage.cancel(id)
            }
        } catch TaskError.cancelled where Task.isCancelled {
            throw CancellationError()  // the caller was cancelled: Swift's error for that
        }
    }

    /// Adds a task made from `execute` (an ``AnyTask``) and returns its handle.
    ///
    /// ```swift
    /// manager.add { try await uploader.flush() } completion: { print($0) }
    /// ```
    ///
    /// - Parameters: as for ``add(task:startImmediately:after:timeout:completeOn:completion:)``;
    ///   `execute` is the work, run each time the task executes.
    /// - Precondition: `after` is not negative; `timeout`, when given, is greater than zero.
    @inlinable
    @discardableResult
    public func add<Value: Sendable>(
        startImmediately: Bool = true,
        after: Duration? = nil,
        timeout: Duration? = nil,
        completeOn: DispatchQueue? = nil,
        execute: @escaping @Sendable () async throws -> Value,
        completion: (@Sendable (Result<Value, any Error>) -> Void)? = nil
    ) -> TaskHandle {
        add(
            task: AnyTask(execute: execute), startImmediately: startImmediately, after: after,
            timeout: timeout, completeOn: completeOn, completion: completion
        )
    }

    /// Runs `body` as a managed task (an ``AnyTask``) and returns its result.
    ///
    /// When `timeout` passes first, the task is cancelled (its Swift task is cancelled) and this
    /// throws ``TaskError/timedOut``. Cancelling the calling Swift task cancels the managed task,
    /// as for ``value(of:after:timeout:)``.
    ///
    /// ```swift
    /// let feed = try await manager.value(timeout: .seconds(5)) { try await api.feed() }
    /// ```
    ///
    /// - Parameters:
    ///   - after: A delay on the manager's clock before the task is intercepted and queued.
    ///   - timeout: The deadline from the task's start to its result, on the manager's clock.
    ///   - body: The work.
    /// - Throws: `body`'s error, an adapter's error, or a ``TaskError``.
    /// - Precondition: `after` is not negative; `timeout`, when given, is greater than zero.
    public func value<Value: Sendable>(
        after: Duration? = nil,
        timeout: Duration? = nil,
        _ body: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        try await value(of: AnyTask(execute: body), after: after, timeout: timeout)
    }

    /// Suspends until every started task has finished: delayed, queued, held by an interceptor,
    /// executing, reacting or requeued. Tasks added with `startImmediately: false` and not
    /// started are not waited for; tasks added while waiting are. Returns at once when there is
    /// nothing to wait for, or when the calling Swift task is cancelled.
    public func waitTillAllTasksFinished() async {
        await storage.waitTillAllTasksFinished()
    }

    /// Shuts the manager down: refuses new tasks, lets the started ones finish for
    /// ``shutdownGracePeriod``, then cancels every task that remains (started or not).
    ///
    /// From the call on, a task added with ``add(task:startImmediately:after:timeout:completeOn:completion:)``
    /// or ``value(of:after:timeout:)`` is not run: its ``ManagedTask/didCancel(with:)`` runs and
    /// its caller receives ``TaskError/shuttingDown`` (its handle has identifier `0` and reports
    /// ``TaskState/finished``). Tasks already added keep running, queued ones still start, for
    /// up to the grace period on the manager's clock; the tasks still unfinished then (and
    /// those added with `startImmediately: false` and never started) are cancelled as by
    /// ``TaskHandle/cancel()``: their callers receive ``TaskError/cancelled``.
    ///
    /// If the calling Swift task is cancelled (before or during the grace period), what remains is
    /// cancelled at once. Returns when every caller has been answered (every completion has
    /// returned), cancelled or not. Calling it again shuts down again (the manager stays closed).
    public func shutDown() async {
        await storage.shutDown(gracePeriod: shutdownGracePeriod)
    }

    /// Whether ``shutDown()`` has begun: new tasks are refused with ``TaskError/shuttingDown``.
    public var isShuttingDown: Bool { storage.isShuttingDown }

    @usableFromInline
    static func checkTiming(after: Duration?, timeout: Duration?, in function: String) {
        if let after {
            precondition(after >= .zero, "TaskManager.\(function): after must be >= 0, got \(after)")
        }
        if let timeout {
            precondition(timeout > .zero, "TaskManager.\(function): timeout must be > 0, got \(timeout)")
        }
    }
}
