import DequeModule

/// The whole bookkeeping of a ``TaskManager``, as a pure value type.
///
/// Every method is an event (a task added, started, cancelled, a timer fired, an execution or a
/// reaction finished…); it updates the state and returns the *actions* the owner must perform
/// after releasing its lock (run interceptors, spawn an execution, deliver a result, start a
/// reaction, cancel a job, resume waiters…). Nothing here runs user code or touches a thread,
/// so every rule is tested without concurrency.
///
/// `Payload` is what the owner needs to act on a task (the type-erased task and its completion);
/// `Job` is a cancellable unit the owner spawned (a Swift `Task`), kept so that it can be
/// cancelled.
struct TaskManagerStateMachine<Payload, Job> {
    /// Why the machine ends a task without its own result.
    enum Termination: Sendable {
        case cancelled
        case timedOut
        case discarded
        /// The reactor at this index, which was to requeue the task, failed with `error`.
        case reactorFailed(reactor: Int, error: any Error)
        /// The reactor at this index, which was to requeue the task, timed out.
        case reactorTimedOut(reactor: Int)
    }

    /// What a spawned timer is for.
    enum TimerKind: Hashable, Sendable {
        case delay
        case deadline
    }

    /// What the owner must do, in order, after unlocking.
    enum Action {
        /// Sleep `duration` on the clock, then report ``TaskManagerStateMachine/timerFired(id:kind:)``;
        /// register the sleeping job with ``registerTimer(id:kind:job:)``.
        case startTimer(id: Int, kind: TimerKind, duration: Duration)
        /// Run the interceptors on the task (their batch counts are given, by interceptor) and
        /// report ``interceptionFinished(id:verdict:)``.
        case intercept(id: Int, payload: Payload, batchCounts: [Int])
        /// Run (adapt and) execute the task, store its result in the payload, and report
        /// ``executionFinished(id:attempt:reactable:)``; make the job cancellable through the
        /// payload (``cancelExecution(payload:)``).
        case execute(id: Int, payload: Payload, attempt: Int)
        /// Ask the reactors about the stored result and report ``reactorsEvaluated(id:attempt:matched:)``.
        case evaluateReactors(id: Int, payload: Payload, attempt: Int)
        /// Deliver the stored result to the caller, then (once the caller's completion has
        /// returned, wherever it runs) report ``deliveriesReturned(_:)``.
        case deliver(payload: Payload)
        /// Tell the task it ended (`didCancel`), then complete the caller with the error, then
        /// report ``deliveriesReturned(_:)`` as for ``deliver(payload:)``.
        case terminate(payload: Payload, reason: Termination)
        /// Run reactor `reactor` as reaction `generation`; register its job with
        /// ``registerReaction(reactor:generation:job:)``, and if it has a timeout start a timer
        /// that reports ``reactionTimedOut(reactor:generation:)``.
        case startReaction(reactor: Int, generation: Int)
        /// Cancel the job running the task's current execution: the task ended while executing.
        case cancelExecution(payload: Payload)
        /// Cancel a job that is no longer wanted.
        case cancel(Job)
        /// Resume these `waitTillAllTasksFinished` waiters.
        case resumeWaiters([Int])
    }

    /// The actions of one event, in order. Most events yield at most three, which are stored
    /// inline; only longer lists allocate.
    ///
    /// The owner drains a list with ``popFirst()``, which moves each action out: iterating (a
    /// `Sequence`, for tests) copies the list and every action, a retain and a release per
    /// payload.
    struct ActionList: Sequence, ExpressibleByArrayLiteral {
        private var first: Action?
        private var second: Action?
        private var third: Action?
        private var overflow: [Action] = []
        /// The number of actions appended.
        private var appended = 0
        /// The number of actions taken by ``popFirst()``.
        private var taken = 0

        init() {}

        init(arrayLiteral elements: Action...) {
            for element in elements { append(element) }
        }

        /// The number of actions not taken yet.
        var count: Int { appended - taken }

        var isEmpty: Bool { appended == taken }

        mutating func append(_ action: consuming Action) {
            switch appended {
            case 0: first = consume action
            case 1: second = consume action
            case 2: third = consume action
            default: overflow.append(consume action)
            }
            appended += 1
        }

        /// Appends the actions of `other` not taken yet, moving them.
        mutating func append(contentsOf other: consuming ActionList) {
            while let action = other.popFirst() { append(action) }
        }

        /// Removes the first action not taken yet and returns it, moved out of the list.
        mutating func popFirst() -> Action? {
            guard taken < appended else { return nil }
            let index = taken
            taken += 1
            switch index {
            case 0: return first.take()
            case 1: return second.take()
            case 2: return third.take()
            default: return overflow[index - 3]
            }
        }

        struct Iterator: IteratorProtocol {
            var list: ActionList

            mutating func next() -> Action? { list.popFirst() }
        }

        func makeIterator() -> Iterator { Iterator(list: self) }
    }

    private enum Phase: Equatable {
        /// Added with `startImmediately: false`, not started.
        case notStarted
        /// Started, waiting for its `after:` delay.
        case delayed
        /// Waiting for interception.
        case queued
        /// The interceptors are looking at it.
        case intercepting
        /// The interceptors are done and their verdict is being applied (never left in this
        /// phase after an event). A termination applies at once from here.
        case intercepted
        /// Parked in an interceptor's batch.
        case held(interceptor: Int)
        /// Intercepted (or needing no interception), waiting for a slot.
        case ready
        /// Executing.
        case executing
        /// Its result is with the reactors' `shouldExecute`.
        case evaluating
        /// Waiting for the reactions it triggered.
        case reacting
    }

    /// What every task needs at every step; kept small because the hot path reads and writes
    /// it in place in `entries`. Rarely needed state lives in the side tables below.
    private struct Entry {
        var payload: Payload
        var phase: Phase
        var needsInterception: Bool
        /// Counts executions; a report from an older execution is stale.
        var attempt = 0
        /// Matches the queue slot holding this task; older slots are stale.
        var ticket = 0
        var deadlineTimer: Job?
    }

    /// The `after:` delay and deadline of a task not started yet (or waiting for its delay).
    private struct Schedule {
        var delay: Duration?
        var timeout: Duration?
    }

    /// What a reacting task waits for.
    private struct ReactionWait {
        /// The reactions it waits for.
        var awaited: [Int]
        /// Whether one of them requeues it.
        var requeue: Bool
        /// Whether a requeueing one asks for re-interception.
        var reintercept: Bool
    }

    private struct Reaction {
        var generation: Int
        /// The tasks that triggered or joined this run, in order.
        var tasks: [Int]
        var job: Job?
        var timer: Job?
    }

    private let interceptorCount: Int
    private let reactorConfigurations: [ReactorConfiguration]
    private let maximumRunning: Int

    private var entries = TaskEntryTable<Entry>()
    /// Side tables, by task identifier, holding state only some tasks have at some steps.
    private var schedules: [Int: Schedule] = [:]
    private var delayTimers: [Int: Job] = [:]
    /// Terminations that arrived while the interceptors were looking at the task.
    private var deferredTerminations: [Int: Termination] = [:]
    private var reactionWaits: [Int: ReactionWait] = [:]
    private var nextTicket = 1
    private var interceptionQueue: Deque<(id: Int, ticket: Int)> = []
    private var readyQueue: Deque<(id: Int, ticket: Int)> = []
    private var batches: [[Int]]
    /// `batches[i].count`, kept as its own array so an interception can take a snapshot without
    /// allocating (copy-on-write copies it only if a batch changes while a snapshot is alive).
    private var batchCounts: [Int]
    private var interceptionInProgress = false
    private var reactions: [Reaction?]
    private var nextGeneration = 1
    private var suspensions = 0
    /// Started tasks not yet finished (what `waitTillAllTasksFinished` waits for).
    private var activeCount = 0
    /// Deliveries (`deliver` and `terminate` actions) whose completion has not returned yet:
    /// waiters also wait for them, so that every completion has run when they resume.
    private var deliveriesInFlight = 0
    private var waiters: [Int] = []

    /// The number of tasks executing now.
    private(set) var runningCount = 0

    /// Started tasks that are not executing and not finished: delayed, waiting for interception
    /// or a slot, held by an interceptor, or waiting for a reaction.
    var queuedCount: Int { activeCount - runningCount }

    /// Creates the machine.
    ///
    /// - Parameters:
    ///   - interceptorCount: how many interceptors the manager has.
    ///   - reactorConfigurations: each reactor's configuration, by index.
    ///   - maximumConcurrentTasks: the most executions at once; `nil` for no limit.
    init(interceptorCount: Int, reactorConfigurations: [ReactorConfiguration], maximumConcurrentTasks: Int?) {
        self.interceptorCount = interceptorCount
        self.reactorConfigurations = reactorConfigurations
        self.maximumRunning = maximumConcurrentTasks ?? Int.max
        self.batches = Array(repeating: [], count: interceptorCount)
        self.batchCounts = Array(repeating: 0, count: interceptorCount)
        self.reactions = Array(repeating: nil, count: reactorConfigurations.count)
    }

    // MARK: - Queries

    /// The state a handle reports for task `id`.
    func state(of id: Int) -> TaskState {
        guard let entry = entries[id] else { return .finished }
        switch entry.phase {
        case .notStarted, .delayed, .queued, .intercepting, .intercepted, .held, .ready: return .pending
        case .executing, .evaluating, .reacting: return .executing
        }
    }

    /// How many tasks interceptor `index` holds.
    func batchCount(of index: Int) -> Int {
        assert(batchCounts[index] == batches[index].count, "batch count out of step")
        return batchCounts[index]
    }

    /// Whether a suspending reaction is in flight.
    var isSuspended: Bool { suspensions > 0 }

    /// Whether reactor `index` is running.
    func isReacting(_ index: Int) -> Bool { reactions[index] != nil }

    /// Started tasks not finished yet.
    var unfinishedCount: Int { activeCount }

    /// The tasks recorded by reactor `index`'s running reaction (empty when it is not running).
    func reactionTasks(of index: Int) -> [Int] { reactions[index]?.tasks ?? [] }

    /// Deliveries whose completion has not returned yet.
    var pendingDeliveries: Int { deliveriesInFlight }

    /// How many `waitTillAllTasksFinished` waiters are stored.
    var waiterCount: Int { waiters.count }

    /// Whether no started task is unfinished and no completion is running: what
    /// `waitTillAllTasksFinished` waits for.
    var isSettled: Bool { activeCount == 0 && deliveriesInFlight == 0 }

    /// Whether every queue, batch and record is empty (nothing registered at all).
    var isIdle: Bool {
        entries.isEmpty && schedules.isEmpty && delayTimers.isEmpty && deferredTerminations.isEmpty
            && reactionWaits.isEmpty && runningCount == 0 && batches.allSatisfy(\.isEmpty)
            && reactions.allSatisfy { $0 == nil } && suspensions == 0 && !interceptionInProgress
    }

    // MARK: - Tasks

    /// Registers a task; starts it unless `startImmediately` is false.
    mutating func add(
        payload: Payload, startImmediately: Bool, delay: Duration?, timeout: Duration?
    ) -> (id: Int, actions: ActionList) {
        let id = entries.insert(Entry(payload: payload, phase: .notStarted, needsInterception: interceptorCount > 0))
        var actions = ActionList()
        if startImmediately {
            start(id, schedule: Schedule(delay: delay, timeout: timeout), into: &actions)
        } else if delay != nil || timeout != nil {
            schedules[id] = Schedule(delay: delay, timeout: timeout)
        }
        return (id, actions)
    }

    /// Registers a task and makes it execute at once, as ``add(payload:startImmediately:delay:timeout:)``
    /// would for a started task with no delay, when nothing stands between its start and its
    /// execution: the manager has no interceptors and no reactors, no reaction suspends the
    /// queue, and a slot is free. Returns its identifier, its execution being attempt 1 (the
    /// owner spawns it and reports it with ``directExecutionFinished(id:)``), and the duration of
    /// the deadline timer to start, as a ``Action/startTimer(id:kind:duration:)`` action of kind
    /// `deadline` (`timeout`, when given); `nil` (nothing changed) when the task must take the
    /// general way. (Not an action list: returning one costs this path a quarter more.)
    mutating func addExecuting(payload: Payload, timeout: Duration?) -> (id: Int, deadline: Duration?)? {
        // With no interceptor the interception queue is always empty, and with a free slot and
        // no suspension the ready queue is empty after every event: nobody is overtaken.
        guard interceptorCount == 0, reactorConfigurations.isEmpty, suspensions == 0,
            runningCount < maximumRunning
        else { return nil }
        let id = entries.insert(Entry(payload: payload, phase: .executing, needsInterception: false, attempt: 1))
        activeCount += 1
        runningCount += 1
        return (id, timeout)
    }

    /// The execution of a task added with ``addExecuting(payload:timeout:)`` finished. Returns
    /// whether its owner delivers the result (as ``Action/deliver(payload:)`` would, then reports
    /// ``deliveriesReturned(_:)``); `false` when the report is stale (the task ended meanwhile).
    /// The other actions are the ones ``executionFinished(id:attempt:reactable:)`` would return
    /// with the delivery left out.
    mutating func directExecutionFinished(id: Int) -> (deliver: Bool, actions: ActionList) {
        let executing = entries.update(id) { $0.phase == .executing && $0.attempt == 1 }
        guard executing == true else { return (false, []) }
        runningCount -= 1
        var actions = ActionList()
        finish(id, into: &actions, ownerDelivers: true)
        pump(into: &actions)
        return (true, actions)
    }

    /// Registers a task and hands it to the owner's interceptors at once, as
    /// ``add(payload:startImmediately:delay:timeout:)`` would for a started task with no delay,
    /// when nothing else stands between its start and its interception: the manager has
    /// interceptors and no reactors, no reaction suspends the queue, no interception is in
    /// progress or queued, and a slot is free (the conditions under which the general way would
    /// return ``Action/intercept(id:payload:batchCounts:)`` for it alone). Returns its
    /// identifier, the interceptors' batch counts and the duration of the deadline timer to start
    /// (as ``addExecuting(payload:timeout:)``); the owner runs the interceptors and reports with
    /// ``directInterceptionFinished(id:verdict:)``. `nil` (nothing changed) when the task must
    /// take the general way.
    mutating func addIntercepting(payload: Payload, timeout: Duration?) -> (id: Int, batchCounts: [Int], deadline: Duration?)? {
        guard interceptorCount > 0, reactorConfigurations.isEmpty, suspensions == 0, !interceptionInProgress,
            interceptionQueue.isEmpty, runningCount < maximumRunning
        else { return nil }
        let id = entries.insert(Entry(payload: payload, phase: .intercepting, needsInterception: true))
        activeCount += 1
        interceptionInProgress = true
        return (id, batchCounts, timeout)
    }

    /// The interceptors are done with task `id`, added with ``addIntercepting(payload:timeout:)``
    /// (or intercepted the general way). When the verdict executes it and it may start at once
    /// (no task released by the verdict or waiting for a slot goes before it, and a slot is
    /// free), it is registered executing as attempt 1 and `execute` is `true`: the owner spawns
    /// the execution and reports it with ``directExecutionFinished(id:)``. Otherwise `execute`
    /// is `false`, and the actions are the ones ``interceptionFinished(id:verdict:)`` returns.
    /// `nil` actions: none.
    mutating func directInterceptionFinished(id: Int, verdict: InterceptVerdict) -> (execute: Bool, actions: ActionList?) {
        if verdict.decision == .execute, verdict.releasing.isEmpty, deferredTerminations.isEmpty, readyQueue.isEmpty,
            suspensions == 0, runningCount < maximumRunning, interceptionInProgress
        {
            let started = entries.update(id) { entry -> Bool in
                guard entry.phase == .intercepting, entry.attempt == 0 else { return false }
                entry.phase = .executing
                entry.needsInterception = false
                entry.attempt = 1
                return true
            }
            if started == true {
                interceptionInProgress = false
                runningCount += 1
                // `pump` would start nothing from the ready queue (empty, checked above), only a
                // queued interception: with none, no action list (`nil`), which the owner would
                // otherwise build and destroy (~120 instructions) for every task.
                guard !interceptionQueue.isEmpty else { return (true, nil) }
                var actions = ActionList()
                pump(into: &actions)
                return (true, actions)
            }
        }
        var actions = ActionList()
        interceptionFinished(id: id, verdict: verdict, into: &actions)
        return (false, actions)
    }

    /// Starts a task added with `startImmediately: false`. Harmless in any other state.
    mutating func start(id: Int) -> ActionList {
        var actions = ActionList()
        guard entries[id]?.phase == .notStarted else { return actions }
        let schedule = schedules.isEmpty ? nil : schedules.removeValue(forKey: id)
        start(id, schedule: schedule ?? Schedule(), into: &actions)
        return actions
    }

    /// Cancels a task, whatever its state. Harmless once it finished.
    mutating func cancel(id: Int) -> ActionList {
        var actions = ActionList()
        terminate(id, .cancelled, into: &actions)
        pump(into: &actions)
        return actions
    }

    /// Records a spawned timer; returns `true` when it is no longer wanted (cancel it).
    mutating func registerTimer(id: Int, kind: TimerKind, job: Job) -> Bool {
        switch kind {
        case .delay:
            guard entries[id]?.phase == .delayed else { return true }
            delayTimers[id] = job
        case .deadline:
            guard entries.update(id, { $0.deadlineTimer = job }) != nil else { return true }
        }
        return false
    }

    /// A timer of task `id` fired.
    mutating func timerFired(id: Int, kind: TimerKind) -> ActionList {
        var actions = ActionList()
        switch kind {
        case .delay:
            guard entries[id]?.phase == .delayed else { return [] }
            delayTimers[id] = nil
            let timeout = schedules.removeValue(forKey: id)?.timeout
            beginRunning(id, timeout: timeout, into: &actions)
        case .deadline:
            guard entries.update(id, { $0.deadlineTimer = nil }) != nil else { return [] }
            terminate(id, .timedOut, into: &actions)
        }
        pump(into: &actions)
        return actions
    }

    /// The interceptors are done with task `id`; `verdict` combines their commands.
    mutating func interceptionFinished(id: Int, verdict: InterceptVerdict) -> ActionList {
        var actions = ActionList()
        interceptionFinished(id: id, verdict: verdict, into: &actions)
        return actions
    }

    /// ``interceptionFinished(id:verdict:)``, appending the actions to `actions` (the owner's
    /// list being drained: no list of its own to make, move and destroy).
    mutating func interceptionFinished(id: Int, verdict: InterceptVerdict, into actions: inout ActionList) {
        precondition(interceptionInProgress, "interceptionFinished without an interception")
        interceptionInProgress = false
        // Leave `intercepting` first: `terminate` defers anything that finds the task there, so
        // a deferred termination or a discard applied in that phase would never complete it.
        let wasIntercepting = entries.update(id) { entry -> Bool in
            guard entry.phase == .intercepting else { return false }
            entry.phase = .intercepted
            entry.needsInterception = false
            return true
        }
        guard wasIntercepting == true else {
            pump(into: &actions)
            return
        }
        for interceptor in verdict.releasing where !batches[interceptor].isEmpty {
            // Identifiers grow in add order; a batch may be out of order after a requeue.
            for heldID in batches[interceptor].sorted() {
                enqueueReady(heldID)
            }
            batches[interceptor].removeAll()
            batchCounts[interceptor] = 0
        }
        if !deferredTerminations.isEmpty, let deferred = deferredTerminations.removeValue(forKey: id) {
            terminate(id, deferred, into: &actions)
        } else {
            switch verdict.decision {
            case .execute:
                enqueueReady(id)
            case .hold(let interceptor):
                entries.update(id) { $0.phase = .held(interceptor: interceptor) }
                batches[interceptor].append(id)
                batchCounts[interceptor] += 1
            case .discard:
                terminate(id, .discarded, into: &actions)
            }
        }
        pump(into: &actions)
    }

    /// Attempt `attempt` of task `id` finished and its result is stored in the payload.
    /// `reactable` is false when the result must skip the reactors (an adapter failed).
    mutating func executionFinished(id: Int, attempt: Int, reactable: Bool) -> ActionList {
        let evaluate = reactable && !reactorConfigurations.isEmpty
        // The payload to evaluate, `.some(nil)` to finish, `nil` when the report is stale.
        let outcome = entries.update(id) { entry -> Payload?? in
            guard entry.phase == .executing, entry.attempt == attempt else { return nil }
            guard evaluate else { return .some(nil) }
            entry.phase = .evaluating
            return .some(entry.payload)
        } ?? nil
        guard let outcome else { return [] }
        var actions = ActionList()
        runningCount -= 1
        if let payload = outcome {
            actions.append(.evaluateReactors(id: id, payload: payload, attempt: attempt))
        } else {
            finish(id, into: &actions)
        }
        pump(into: &actions)
        return actions
    }

    /// The reactors at indices `matched` asked to react to attempt `attempt` of task `id`.
    mutating func reactorsEvaluated(id: Int, attempt: Int, matched: [Int]) -> ActionList {
        guard let entry = entries[id], entry.phase == .evaluating, entry.attempt == attempt else { return [] }
        var actions = ActionList()
        if matched.isEmpty {
            finish(id, into: &actions)
            pump(into: &actions)
            return actions
        }
        var requeue = false
        var reintercept = false
        for index in matched {
            let configuration = reactorConfigurations[index]
            if configuration.requeuesTask {
                requeue = true
                if configuration.reinterceptOnRequeue && interceptorCount > 0 { reintercept = true }
            }
            if reactions[index] != nil {
                reactions[index]!.tasks.append(id)
            } else {
                let generation = nextGeneration
                nextGeneration += 1
                reactions[index] = Reaction(generation: generation, tasks: [id])
                if configuration.suspendsTaskQueue { suspensions += 1 }
                actions.append(.startReaction(reactor: index, generation: generation))
            }
        }
        entries.update(id) { $0.phase = .reacting }
        reactionWaits[id] = ReactionWait(awaited: matched, requeue: requeue, reintercept: reintercept)
        return actions
    }

    /// Records the job and (optional) timer of reaction `generation` of reactor `reactor`;
    /// returns `true` when the reaction is already over (cancel them).
    mutating func registerReaction(reactor: Int, generation: Int, job: Job?, timer: Job?) -> Bool {
        guard reactions[reactor]?.generation == generation else { return true }
        if let job { reactions[reactor]!.job = job }
        if let timer { reactions[reactor]!.timer = timer }
        return false
    }

    /// Reaction `generation` of reactor `reactor` finished, with `error` if it threw.
    mutating func reactionFinished(reactor: Int, generation: Int, error: (any Error)?) -> ActionList {
        endReaction(reactor: reactor, generation: generation, outcome: error.map { .reactorFailed(reactor: reactor, error: $0) })
    }

    /// Reaction `generation` of reactor `reactor` exceeded its timeout.
    mutating func reactionTimedOut(reactor: Int, generation: Int) -> ActionList {
        endReaction(reactor: reactor, generation: generation, outcome: .reactorTimedOut(reactor: reactor))
    }

    // MARK: - Waiting for all

    /// Adds waiter `waiter`; returns `true` when no started task is unfinished and no completion
    /// is running (resume it now, it was not stored).
    mutating func addWaiter(_ waiter: Int) -> Bool {
        if isSettled { return true }
        waiters.append(waiter)
        return false
    }

    /// The completions of `count` `deliver` or `terminate` actions returned (the owner may
    /// report them in bulk, and late; `count` may be zero).
    mutating func deliveriesReturned(_ count: Int) -> ActionList {
        precondition(count >= 0 && count <= deliveriesInFlight, "deliveriesReturned(\(count)) with \(deliveriesInFlight) in flight")
        deliveriesInFlight -= count
        var actions = ActionList()
        resumeWaitersIfDone(into: &actions)
        return actions
    }

    /// ``deliveriesReturned(_:)`` for one delivery, on the owner's path of every delivered task:
    /// returns the waiters to resume (usually none) rather than an action list, whose
    /// destruction alone costs about 120 instructions (it is destroyed through its metadata).
    mutating func deliveryReturned() -> [Int] {
        precondition(deliveriesInFlight > 0, "deliveryReturned() with no delivery in flight")
        deliveriesInFlight -= 1
        return takeWaitersIfDone()
    }

    /// Removes waiter `waiter` (its Swift task was cancelled); returns whether it was stored.
    mutating func removeWaiter(_ waiter: Int) -> Bool {
        guard let index = waiters.firstIndex(of: waiter) else { return false }
        waiters.remove(at: index)
        return true
    }

    // MARK: - Rules

    private mutating func start(_ id: Int, schedule: Schedule, into actions: inout ActionList) {
        activeCount += 1
        if let delay = schedule.delay, delay > .zero {
            entries.update(id) { $0.phase = .delayed }
            if let timeout = schedule.timeout { schedules[id] = Schedule(timeout: timeout) }
            actions.append(.startTimer(id: id, kind: .delay, duration: delay))
        } else {
            beginRunning(id, timeout: schedule.timeout, into: &actions)
        }
        pump(into: &actions)
    }

    /// The task's start time has come: arm its deadline and queue it.
    private mutating func beginRunning(_ id: Int, timeout: Duration?, into actions: inout ActionList) {
        if let timeout {
            actions.append(.startTimer(id: id, kind: .deadline, duration: timeout))
        }
        enqueue(id)
    }

    private mutating func enqueue(_ id: Int) {
        let ticket = nextTicket
        nextTicket += 1
        let intercept = entries.update(id) { entry -> Bool in
            entry.ticket = ticket
            entry.phase = entry.needsInterception ? .queued : .ready
            return entry.needsInterception
        }!
        if intercept {
            interceptionQueue.append((id, ticket))
        } else {
            readyQueue.append((id, ticket))
        }
    }

    /// Queues the task for execution, skipping interception (it was intercepted, or released
    /// from a batch, which is not re-intercepted).
    private mutating func enqueueReady(_ id: Int) {
        let ticket = nextTicket
        nextTicket += 1
        entries.update(id) { entry in
            entry.needsInterception = false
            entry.phase = .ready
            entry.ticket = ticket
        }!
        readyQueue.append((id, ticket))
    }

    /// Starts whatever may start: executions up to the limit, then one interception.
    private mutating func pump(into actions: inout ActionList) {
        guard suspensions == 0 else { return }
        while runningCount < maximumRunning, let (id, ticket) = readyQueue.popFirst() {
            let started = entries.update(id) { entry -> (payload: Payload, attempt: Int)? in
                guard entry.phase == .ready, entry.ticket == ticket else { return nil }
                entry.phase = .executing
                entry.attempt += 1
                return (entry.payload, entry.attempt)
            }
            guard let (payload, attempt) = started ?? nil else { continue }
            runningCount += 1
            actions.append(.execute(id: id, payload: payload, attempt: attempt))
        }
        guard !interceptionInProgress, runningCount < maximumRunning else { return }
        while let (id, ticket) = interceptionQueue.popFirst() {
            let payload = entries.update(id) { entry -> Payload? in
                guard entry.phase == .queued, entry.ticket == ticket else { return nil }
                entry.phase = .intercepting
                return entry.payload
            }
            guard let payload = payload ?? nil else { continue }
            interceptionInProgress = true
            actions.append(.intercept(id: id, payload: payload, batchCounts: batchCounts))
            return
        }
    }

    /// Delivers the task's stored result and forgets it.
    /// With `ownerDelivers`, the owner delivers it itself (the direct lane): no `deliver` action.
    private mutating func finish(_ id: Int, into actions: inout ActionList, ownerDelivers: Bool = false) {
        guard let entry = entries.remove(id) else { return }
        if !reactionWaits.isEmpty { reactionWaits[id] = nil }
        if let timer = entry.deadlineTimer { actions.append(.cancel(timer)) }
        if !ownerDelivers { actions.append(.deliver(payload: entry.payload)) }
        deliveriesInFlight += 1
        taskEnded(into: &actions)
    }

    /// Ends the task with `reason` (deferred while it is being intercepted).
    private mutating func terminate(_ id: Int, _ reason: Termination, into actions: inout ActionList) {
        guard let entry = entries[id] else { return }
        switch entry.phase {
        case .intercepting:
            if deferredTerminations[id] == nil { deferredTerminations[id] = reason }
            return
        case .held(let index):
            batches[index].removeAll { $0 == id }
            batchCounts[index] -= 1
        case .executing:
            runningCount -= 1
            actions.append(.cancelExecution(payload: entry.payload))
        case .reacting:
            for index in reactionWaits.removeValue(forKey: id)?.awaited ?? [] {
                reactions[index]?.tasks.removeAll { $0 == id }
            }
        case .notStarted, .delayed, .queued, .intercepted, .ready, .evaluating:
            break
        }
        entries.remove(id)
        if !schedules.isEmpty { schedules[id] = nil }
        if !delayTimers.isEmpty, let timer = delayTimers.removeValue(forKey: id) { actions.append(.cancel(timer)) }
        if let timer = entry.deadlineTimer { actions.append(.cancel(timer)) }
        actions.append(.terminate(payload: entry.payload, reason: reason))
        deliveriesInFlight += 1
        if entry.phase != .notStarted { taskEnded(into: &actions) }
    }

    private mutating func taskEnded(into actions: inout ActionList) {
        activeCount -= 1
        resumeWaitersIfDone(into: &actions)
    }

    private mutating func resumeWaitersIfDone(into actions: inout ActionList) {
        let done = takeWaitersIfDone()
        if !done.isEmpty { actions.append(.resumeWaiters(done)) }
    }

    /// The waiters to resume now that nothing is active or being delivered (empty otherwise),
    /// no longer stored.
    private mutating func takeWaitersIfDone() -> [Int] {
        guard activeCount == 0 && deliveriesInFlight == 0 && !waiters.isEmpty else { return [] }
        defer { waiters.removeAll() }
        return waiters
    }

    private mutating func endReaction(reactor: Int, generation: Int, outcome: Termination?) -> ActionList {
        guard let reaction = reactions[reactor], reaction.generation == generation else { return [] }
        // The record of triggering tasks is cleared whatever the outcome.
        reactions[reactor] = nil
        let configuration = reactorConfigurations[reactor]
        if configuration.suspendsTaskQueue { suspensions -= 1 }
        var actions = ActionList()
        if let timer = reaction.timer { actions.append(.cancel(timer)) }
        if outcome != nil, let job = reaction.job { actions.append(.cancel(job)) }
        for id in reaction.tasks {
            guard entries[id]?.phase == .reacting, var wait = reactionWaits[id] else { continue }
            if let outcome, configuration.requeuesTask {
                terminate(id, outcome, into: &actions)
                continue
            }
            wait.awaited.removeAll { $0 == reactor }
            guard wait.awaited.isEmpty else {
                reactionWaits[id] = wait
                continue
            }
            reactionWaits[id] = nil
            if wait.requeue {
                entries.update(id) { $0.needsInterception = wait.reintercept }
                enqueue(id)
            } else {
                finish(id, into: &actions)
            }
        }
        pump(into: &actions)
        return actions
    }
}

/// The combined verdict of a manager's interceptors on one task, folded one command at a time
/// (no intermediate collection): `forceExecute` from any interceptor executes the task;
/// otherwise discard > hold > execute. Every interceptor that answers `execute` or
/// `forceExecute` releases its own batch, whatever the verdict on the task.
struct InterceptVerdict: Sendable {
    /// What happens to the task itself.
    enum Decision: Hashable, Sendable {
        case execute
        /// Parked in the batch of this interceptor (the first one that said hold).
        case hold(interceptor: Int)
        case discard
    }

    private var forced = false
    private var discard = false
    private var holder: Int?
    /// The interceptors whose (non-empty) batch is released.
    private(set) var releasing: [Int] = []

    init() {}

    /// Folds in `command`, answered by interceptor `index` while it held `batchCount` tasks.
    /// An empty batch is not recorded as released (it has nothing to release, and recording it
    /// would allocate for every pass-through interception).
    mutating func record(_ command: InterceptCommand, from index: Int, batchCount: Int) {
        switch command {
        case .execute:
            if batchCount > 0 { releasing.append(index) }
        case .forceExecute:
            forced = true
            if batchCount > 0 { releasing.append(index) }
        case .discard:
            discard = true
        case .hold:
            if holder == nil { holder = index }
        }
    }

    /// The verdict on the task.
    var decision: Decision {
        if forced { return .execute }
        if discard { return .discard }
        if let holder { return .hold(interceptor: holder) }
        return .execute
    }
}

extension TaskManagerStateMachine {
    /// Cancels every task that has not finished, started or not (a shutdown's last step).
    mutating func cancelAll() -> ActionList {
        var actions = ActionList()
        for id in entries.identifiers { terminate(id, .cancelled, into: &actions) }
        pump(into: &actions)
        return actions
    }
}
