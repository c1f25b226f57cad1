import Logging

/// The thin owner of a ``TaskManagerStateMachine``: holds it in a lock, feeds it events, and
/// performs the actions it returns after unlocking.
@usableFromInline
final class TaskManagerStorage: Sendable {
    typealias Machine = TaskManagerStateMachine<AnyTaskBox, Task<Void, Never>>
    typealias Action = Machine.Action

    private struct State {
        var machine: Machine
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
        /// The running and queued counts last applied to the metrics (with a `metricsLabel`).
        var reportedRunning = 0
        var reportedQueued = 0
        /// Set by ``shutDown(gracePeriod:)``: new tasks are refused.
        var shuttingDown = false
        /// The boxes of tasks whose delivery returned, newest first, linked through
        /// ``AnyTaskBox/nextRetired``, and how many: released by the next add (see
        /// ``deliveryReturned(retiring:)``).
        var retired: AnyTaskBox?
        var retiredCount = 0

        /// Adds `box` to the retired boxes; returns the whole list, taken, for the caller to
        /// release after unlocking, when the manager is settled (nothing would come to take it
        /// soon) or the list reached ``TaskManagerStorage/retiredLimit``.
        mutating func retire(_ box: AnyTaskBox) -> AnyTaskBox? {
            box.nextRetired = retired.take()
            retired = box
            retiredCount += 1
            guard machine.isSettled || retiredCount >= TaskManagerStorage.retiredLimit else { return nil }
            return takeRetired()
        }

        /// Takes the retired boxes, if any (the caller releases them after unlocking); writes
        /// nothing when there are none.
        mutating func takeRetired() -> AnyTaskBox? {
            guard retired != nil else { return nil }
            retiredCount = 0
            return retired.take()
        }
    }

    /// The most retired boxes the manager keeps for the next add before the delivery that
    /// retires one releases them itself.
    static var retiredLimit: Int { 128 }

    private let state: LockedState<State>
    @usableFromInline let interceptors: [any Interceptor]
    let reactors: [any Reactor]
    private let reactorConfigurations: [ReactorConfiguration]
    let clock: any Clock<Duration>
    let logger: Logger
    /// Whether `logger` writes trace messages, read once (documented at the manager's `logger:`):
    /// asking the logger per task copies its handler (about 200 instructions per message with
    /// the retains, two messages per add; callgrind).
    private let tracesTasks: Bool
    /// The metric objects, with a `metricsLabel`; `nil` (no metric objects) without.
    let metrics: TaskManagerMetrics?
    /// The tracing seam, with a `tracing:` other than `.none`; `nil` (no span, no context) without.
    let tracer: (any TaskTracer)?
    /// Which direct lane ``addDirectly(_:)`` may take a task through: ``DirectLane/executing``
    /// with no interceptors, reactors, tracer or metrics; ``DirectLane/intercepting`` with
    /// interceptors and none of the others.
    private let directLane: DirectLane?

    private enum DirectLane {
        case executing
        case intercepting
    }

    init(
        interceptors: [any Interceptor], reactors: [any Reactor], maximumConcurrentTasks: Int?,
        clock: any Clock<Duration>, logger: Logger, metrics: TaskManagerMetrics? = nil,
        tracer: (any TaskTracer)? = nil
    ) {
        self.metrics = metrics
        self.tracer = tracer
        self.directLane = !reactors.isEmpty || metrics != nil || tracer != nil
            ? nil : interceptors.isEmpty ? .executing : .intercepting
        self.interceptors = interceptors
        self.reactors = reactors
        let configurations = reactors.map(\.configuration)
        self.reactorConfigurations = configurations
        self.clock = clock
        self.logger = logger
        self.tracesTasks = logger.logLevel <= .trace
        self.state = LockedState(State(machine: Machine(
            interceptorCount: interceptors.count, reactorConfigurations: configurations,
            maximumConcurrentTasks: maximumConcurrentTasks
        )))
    }

    // MARK: - Events

    @usableFromInline
    func add(_ box: AnyTaskBox, startImmediately: Bool, delay: Duration?) -> TaskHandle {
        if let tracer { box.context = tracer.currentContext() }
        let timeout = box.effectiveTimeout
        // Identifier 0 (never a task's): refused.
        var retired: AnyTaskBox?
        defer { Self.release(retired) }
        let (id, actions) = state.withLock { state -> (id: Int, actions: Machine.ActionList) in
            retired = state.takeRetired()
            if state.shuttingDown { return (0, []) }
            return state.machine.add(payload: box, startImmediately: startImmediately, delay: delay, timeout: timeout)
        }
        if id == 0 {
            logger.debug("task refused: the manager is shutting down")
            box.terminate(with: .shuttingDown) {}
            return TaskHandle(identifier: 0, storage: self)
        }
        if tracesTasks { logger.trace("task added", metadata: ["task": "\(id)"]) }
        perform(actions)
        return TaskHandle(identifier: id, storage: self)
    }

    /// Adds `box` started, for a caller that spawns and reports the execution itself when it
    /// may (``TaskManager/value(of:after:timeout:)``'s direct lane), in one of two ways:
    ///
    /// - With no interceptors, reactors, tracer or metrics, and a free slot: registers it as
    ///   executing at once (see ``TaskManagerStateMachine/addExecuting(payload:timeout:)``).
    /// - With interceptors (and no reactors, tracer or metrics), when no other task is being
    ///   intercepted or waits for it and a slot is free: runs the interceptors on it here, as the
    ///   `intercept` action would, and when their verdict lets it start at once registers it as
    ///   executing (see ``TaskManagerStateMachine/addIntercepting(payload:timeout:)`` and
    ///   ``TaskManagerStateMachine/directInterceptionFinished(id:verdict:)``); otherwise the
    ///   task goes on the general way (held, queued for a slot, discarded or terminated), and
    ///   `execute` is `false`.
    ///
    /// Returns the task's identifier and whether the caller is to spawn its execution (attempt 1,
    /// adapters first) and report it with ``directExecutionEnded(id:)``; `nil` when the
    /// task must be added with ``add(_:startImmediately:delay:)`` instead (nothing was
    /// registered).
    @usableFromInline
    func addDirectly(_ box: AnyTaskBox) -> (id: Int, execute: Bool)? {
        switch directLane {
        case nil:
            return nil
        case .executing:
            let timeout = box.effectiveTimeout
            var retired: AnyTaskBox?
            defer { Self.release(retired) }
            guard let (id, deadline) = state.withLock({ state -> (Int, Duration?)? in
                retired = state.takeRetired()
                return state.shuttingDown ? nil : state.machine.addExecuting(payload: box, timeout: timeout)
            }) else { return nil }
            if tracesTasks { logger.trace("task added", metadata: ["task": "\(id)"]) }
            if let deadline { perform([.startTimer(id: id, kind: .deadline, duration: deadline)]) }
            return (id, true)
        case .intercepting:
            let timeout = box.effectiveTimeout
            var retired: AnyTaskBox?
            defer { Self.release(retired) }
            guard let (id, batchCounts, deadline) = state.withLock({ state -> (Int, [Int], Duration?)? in
                retired = state.takeRetired()
                return state.shuttingDown ? nil : state.machine.addIntercepting(payload: box, timeout: timeout)
            }) else { return nil }
            if tracesTasks { logger.trace("task added", metadata: ["task": "\(id)"]) }
            if let deadline { perform([.startTimer(id: id, kind: .deadline, duration: deadline)]) }
            let verdict = box.intercept(interceptors, batchCounts: batchCounts)
            if tracesTasks { logger.trace("task intercepted", metadata: ["task": "\(id)", "verdict": "\(verdict.decision)"]) }
            let (execute, actions) = state.withLock { $0.machine.directInterceptionFinished(id: id, verdict: verdict) }
            if let actions, !actions.isEmpty { perform(actions) }
            return (id, execute)
        }
    }

    /// The execution of a task that ``addDirectly(_:)`` let its caller spawn ended; returns whether its caller
    /// is to be answered with its result (then call ``deliveryReturned()`` once it is), `false`
    /// when the task ended otherwise meanwhile (the result is dropped).
    @usableFromInline
    func directExecutionEnded(id: Int) -> Bool {
        let (deliver, actions) = state.withLock { $0.machine.directExecutionFinished(id: id) }
        if !actions.isEmpty { perform(actions) }
        return deliver
    }

    @usableFromInline
    func start(_ id: Int) {
        perform(state.withLock { $0.machine.start(id: id) })
    }

    @usableFromInline
    func cancel(_ id: Int) {
        perform(state.withLock { $0.machine.cancel(id: id) })
    }

    func state(of id: Int) -> TaskState {
        state.withLock { $0.machine.state(of: id) }
    }

    func waitTillAllTasksFinished() async {
        let waiter = state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if Task.isCancelled { return true }
                    if state.machine.addWaiter(waiter) { return true }
                    state.waiters[waiter] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
                _ = state.machine.removeWaiter(waiter)
                return state.waiters.removeValue(forKey: waiter)
            }
            continuation?.resume()
        }
    }

    /// A completion returned: the machine counts it, under the lock, so a
    /// `waitTillAllTasksFinished` waiter resumes only after the last completion.
    ///
    /// A delivery passes its box as `retiring` (every delivery does): the box (with the user's
    /// task and completion) is then released by the next add (``add(_:startImmediately:delay:)``
    /// or ``addDirectly(_:)``), on the adding thread, rather than by the delivering thread. Most of a task's memory (the box, the task, the completion, the
    /// job) is allocated by the thread that adds it; glibc's malloc frees a chunk much faster on
    /// that thread than on another, where the two threads meet in the arena's lock (figures:
    /// `Benchmarks/NOTES.md`, issue 37). A settled manager (nothing running, no completion in flight), or
    /// one holding ``retiredLimit`` boxes, has the delivery release them at once, so a finished
    /// task's `deinit` waits for at most that many others and never for a manager left idle.
    @usableFromInline
    func deliveryReturned(retiring box: AnyTaskBox? = nil) {
        // The `resumeWaiters` action's work, done in the same critical section.
        var released: AnyTaskBox?
        let continuations = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            let done = state.machine.deliveryReturned()
            if let box { released = state.retire(box) }
            return done.isEmpty ? [] : done.compactMap { state.waiters.removeValue(forKey: $0) }
        }
        Self.release(released)
        for continuation in continuations { continuation.resume() }
    }

    /// Releases a list of retired boxes (``State/takeRetired()``) one box at a time: released
    /// from its head, a list would release each box from its predecessor's `deinit`, one stack
    /// frame deeper per box. Never under the lock: a box's `deinit` releases user objects.
    private static func release(_ list: AnyTaskBox?) {
        var next = list
        while let box = next {
            next = box.nextRetired.take()
        }
    }

    /// How many retired boxes wait for the next add (tests).
    var retiredCount: Int {
        state.withLock { $0.retiredCount }
    }

    var isShuttingDown: Bool {
        state.withLock { $0.shuttingDown }
    }

    /// Refuses new tasks, waits up to `gracePeriod` (on the clock) for the started ones, cancels
    /// what remains, and returns once every caller was answered. A cancelled caller skips the
    /// wait.
    func shutDown(gracePeriod: Duration) async {
        state.withLock { $0.shuttingDown = true }
        logger.debug("shutting down", metadata: ["grace period": "\(gracePeriod)"])
        if gracePeriod > .zero && !Task.isCancelled {
            let clock = self.clock
            await withTaskGroup(of: Void.self) { group in
                // Both children return early when this task is cancelled.
                group.addTask { await self.waitTillAllTasksFinished() }
                group.addTask { try? await clock.sleep(for: gracePeriod) }
                await group.next()
                group.cancelAll()
            }
        }
        perform(state.withLock { $0.machine.cancelAll() })
        // The terminations were performed above; completions on a queue may still be running.
        // Waited for in a task of its own, which a cancellation of this one does not reach.
        await Task { await self.waitTillAllTasksFinished() }.value
    }

    /// Reads the state machine (for tests and diagnostics).
    func inspect<R>(_ body: (Machine) -> R) -> R {
        state.withLock { body($0.machine) }
    }

    // MARK: - Performing actions

    /// Performs `actions`, and the actions that performing them yields, iteratively (an
    /// interception that releases a batch does not recurse).
    private func perform(_ actions: consuming Machine.ActionList) {
        var queue = actions
        // Follow-ups join the end of the list being drained: every action of a round runs
        // before the actions it produced.
        while let action = queue.popFirst() { perform(action, followUps: &queue) }
        if let metrics { recordCounts(metrics) }
    }

    /// Applies the change of the running and queued counts since the last call to `metrics`,
    /// after the lock is released.
    private func recordCounts(_ metrics: TaskManagerMetrics) {
        let (running, queued) = state.withLock { state -> (Int, Int) in
            let running = state.machine.runningCount
            let queued = state.machine.queuedCount
            defer { (state.reportedRunning, state.reportedQueued) = (running, queued) }
            return (running - state.reportedRunning, queued - state.reportedQueued)
        }
        metrics.apply(runningDelta: running, queuedDelta: queued)
    }

    /// Performs one action; appends the follow-up actions it produces synchronously.
    private func perform(_ action: consuming Action, followUps: inout Machine.ActionList) {
        switch consume action {
        case .startTimer(let id, let kind, let duration):
            let clock = self.clock
            let job = Task { [self] in
                do {
                    try await clock.sleep(for: duration)
                } catch {
                    return
                }
                perform(state.withLock { $0.machine.timerFired(id: id, kind: kind) })
            }
            if state.withLock({ $0.machine.registerTimer(id: id, kind: kind, job: job) }) { job.cancel() }

        case .intercept(let id, let box, let batchCounts):
            let verdict = box.intercept(interceptors, batchCounts: batchCounts)
            if tracesTasks { logger.trace("task intercepted", metadata: ["task": "\(id)", "verdict": "\(verdict.decision)"]) }
            state.withLock { $0.machine.interceptionFinished(id: id, verdict: verdict, into: &followUps) }

        case .execute(let id, let box, let attempt):
            // Two jobs, so that an untraced execution runs the code it runs without tracing: a
            // branch on the tracer inside one job (or one method) costs every untraced task
            // instructions, or an allocation (Benchmarks/NOTES.md).
            guard let tracer else {
                let job = Task { [self] () async throws -> Void in
                    let stopwatch = metrics?.stopwatch()
                    let reactable = await box.run(adapters: interceptors)
                    executionEnded(id: id, attempt: attempt, reactable: reactable, stopwatch: stopwatch)
                }
                box.publishExecution(job)
                return
            }
            let job = Task { [self] () async throws -> Void in
                let stopwatch = metrics?.stopwatch()
                let reactable = await box.run(adapters: interceptors, tracer: tracer)
                executionEnded(id: id, attempt: attempt, reactable: reactable, stopwatch: stopwatch)
            }
            box.publishExecution(job)

        case .cancelExecution(let box):
            box.cancelExecution()

        case .evaluateReactors(let id, let box, let attempt):
            let handle = TaskHandle(identifier: id, storage: self)
            var matched: [Int] = []
            for (index, reactor) in reactors.enumerated() where box.shouldReact(reactor, handle: handle) {
                matched.append(index)
            }
            if !matched.isEmpty {
                logger.debug("task triggered reactors", metadata: ["task": "\(id)", "reactors": "\(matched)"])
            }
            followUps.append(contentsOf: state.withLock {
                $0.machine.reactorsEvaluated(id: id, attempt: attempt, matched: matched)
            })

        case .deliver(let box):
            if let metrics { (box.succeeded ? metrics.succeeded : metrics.failed).increment() }
            box.deliverResult { [self] in deliveryReturned(retiring: box) }

        case .terminate(let box, let reason):
            let error = taskError(for: reason)
            logger.debug("task ended", metadata: ["error": "\(error)"])
            if let metrics { metrics.counter(for: reason).increment() }
            box.terminate(with: error) { [self] in deliveryReturned(retiring: box) }

        case .startReaction(let index, let generation):
            startReaction(index, generation: generation)

        case .cancel(let job):
            job.cancel()

        case .resumeWaiters(let ids):
            let continuations = state.withLock { state in ids.compactMap { state.waiters.removeValue(forKey: $0) } }
            for continuation in continuations { continuation.resume() }
        }
    }

    /// An execution's job returned: records its duration (with a `metricsLabel`) and reports it
    /// to the machine.
    private func executionEnded(id: Int, attempt: Int, reactable: Bool, stopwatch: (@Sendable () -> Duration)?) {
        if let stopwatch, let metrics { metrics.taskDuration.record(stopwatch()) }
        perform(state.withLock { $0.machine.executionFinished(id: id, attempt: attempt, reactable: reactable) })
    }

    private func startReaction(_ index: Int, generation: Int) {
        let reactor = reactors[index]
        logger.debug("reaction started", metadata: ["reactor": "\(type(of: reactor))"])
        let job = Task { [self] in
            var failure: (any Error)?
            do {
                try await reactor.execute()
            } catch {
                failure = error
            }
            if let failure {
                logger.debug("reaction failed", metadata: ["reactor": "\(type(of: reactor))", "error": "\(failure)"])
            }
            perform(state.withLock { $0.machine.reactionFinished(reactor: index, generation: generation, error: failure) })
        }
        var timer: Task<Void, Never>?
        if let timeout = reactorConfigurations[index].timeout {
            let clock = self.clock
            timer = Task { [self] in
                do {
                    try await clock.sleep(for: timeout)
                } catch {
                    return
                }
                logger.debug("reaction timed out", metadata: ["reactor": "\(type(of: reactor))"])
                perform(state.withLock { $0.machine.reactionTimedOut(reactor: index, generation: generation) })
            }
        }
        if state.withLock({ $0.machine.registerReaction(reactor: index, generation: generation, job: job, timer: timer) }) {
            job.cancel()
            timer?.cancel()
        }
    }

    private func taskError(for reason: Machine.Termination) -> TaskError {
        switch reason {
        case .cancelled: return .cancelled
        case .timedOut: return .timedOut
        case .discarded: return .discarded
        case .reactorFailed(let index, let error): return .reactorFailed(type: type(of: reactors[index]), error: error)
        case .reactorTimedOut(let index): return .reactorTimedOut(type: type(of: reactors[index]))
        }
    }
}
