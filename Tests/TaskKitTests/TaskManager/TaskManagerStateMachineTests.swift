import Testing
@testable import TaskKit

/// Every rule of TaskManager, checked on the pure state machine: no threads, no clocks, no tasks.
///
/// The payload is the task's name and a job is a string naming it, so every action renders as a
/// short string (see ``TaskManagerMachineHarness/render(_:)``).
@Suite struct TaskManagerStateMachineTests {
    typealias Harness = TaskManagerMachineHarness

    // MARK: Interception and termination

    @Test func aTaskCancelledWhileBeingInterceptedCompletesWhenInterceptionEnds() {
        var h = Harness(interceptors: 1)
        let a = h.add("a")
        #expect(h.last == ["intercept(a,[0])"])
        // The interceptor runs outside the lock; the cancel arrives meanwhile and is deferred.
        #expect(h.cancel(a) == [])
        #expect(h.machine.state(of: a) == .pending)
        #expect(h.intercepted(a, [.execute]) == ["terminate(a,cancelled)"])
        #expect(h.machine.state(of: a) == .finished)
        #expect(h.machine.isIdle)
        #expect(h.machine.unfinishedCount == 0)
    }

    @Test func discardCompletesTheCallerWithDiscarded() {
        var h = Harness(interceptors: 1)
        let a = h.add("a")
        #expect(h.intercepted(a, [.discard]) == ["terminate(a,discarded)"])
        #expect(h.machine.state(of: a) == .finished)
        #expect(h.machine.isIdle)
        #expect(h.machine.unfinishedCount == 0)
    }

    @Test func aTaskTimingOutWhileBeingInterceptedCompletesWhenInterceptionEnds() {
        var h = Harness(interceptors: 1)
        let a = h.add("a", timeout: .seconds(1))
        #expect(h.last == ["timer(a,deadline,1.0 seconds)", "intercept(a,[0])"])
        h.registerTimer(a, .deadline)
        #expect(h.fire(a, .deadline) == [])
        // A later cancel does not replace the first reason.
        #expect(h.cancel(a) == [])
        #expect(h.intercepted(a, [.hold]) == ["terminate(a,timedOut)"])
        #expect(h.machine.batchCount(of: 0) == 0)
        #expect(h.machine.isIdle)
    }

    @Test func aDeferredTerminationStillReleasesTheBatchTheInterceptorReleased() {
        var h = Harness(interceptors: 1)
        let a = h.add("a")
        h.intercepted(a, [.hold])
        let b = h.add("b")
        #expect(h.last == ["intercept(b,[1])"])
        h.cancel(b)
        #expect(h.intercepted(b, [.execute]) == ["terminate(b,cancelled)", "execute(a#1)"])
        #expect(h.machine.batchCount(of: 0) == 0)
    }

    // MARK: Adding and starting

    @Test func anAddedTaskExecutesAtOnceAndDeliversItsResult() {
        var h = Harness()
        let a = h.add("a")
        #expect(h.last == ["execute(a#1)"])
        #expect(h.machine.state(of: a) == .executing)
        #expect(h.machine.runningCount == 1)
        #expect(h.executed(a) == ["deliver(a)"])
        #expect(h.machine.state(of: a) == .finished)
        #expect(h.machine.isIdle)
    }

    @Test func aTaskNotStartedImmediatelyWaitsForStartAndStartIsIdempotent() {
        var h = Harness()
        let a = h.add("a", startImmediately: false)
        #expect(h.last == [])
        #expect(h.machine.state(of: a) == .pending)
        #expect(h.machine.unfinishedCount == 0)
        #expect(h.start(a) == ["execute(a#1)"])
        #expect(h.machine.unfinishedCount == 1)
        #expect(h.start(a) == [])
        h.executed(a)
        #expect(h.start(a) == [])
        #expect(h.machine.isIdle)
    }

    @Test func aDelayedTaskWaitsForItsTimerThenArmsItsDeadline() {
        var h = Harness()
        let a = h.add("a", delay: .seconds(5), timeout: .seconds(2))
        #expect(h.last == ["timer(a,delay,5.0 seconds)"])
        #expect(h.registerTimer(a, .delay) == false)
        #expect(h.machine.state(of: a) == .pending)
        #expect(h.machine.unfinishedCount == 1)
        #expect(h.fire(a, .delay) == ["timer(a,deadline,2.0 seconds)", "execute(a#1)"])
        #expect(h.fire(a, .delay) == [])
        #expect(h.registerTimer(a, .deadline) == false)
        #expect(h.executed(a) == ["cancel(deadline:a)", "deliver(a)"])
        // The deadline timer firing late changes nothing.
        #expect(h.fire(a, .deadline) == [])
        #expect(h.machine.isIdle)
    }

    @Test func aZeroDelayStartsAtOnceAndAStartedLaterTaskGetsItsDelay() {
        var h = Harness()
        h.add("a", delay: .zero)
        #expect(h.last == ["execute(a#1)"])
        let b = h.add("b", startImmediately: false, delay: .seconds(1))
        #expect(h.last == [])
        #expect(h.start(b) == ["timer(b,delay,1.0 seconds)"])
        #expect(h.start(b) == [])
    }

    @Test func cancellingADelayedTaskCancelsItsTimerAndALateRegistrationIsRefused() {
        var h = Harness()
        let a = h.add("a", delay: .seconds(5))
        h.registerTimer(a, .delay)
        #expect(h.cancel(a) == ["cancel(delay:a)", "terminate(a,cancelled)"])
        #expect(h.fire(a, .delay) == [])
        let b = h.add("b", delay: .seconds(5))
        // The timer job is registered only after the cancel: the machine asks to cancel it.
        h.cancel(b)
        #expect(h.last == ["terminate(b,cancelled)"])
        #expect(h.registerTimer(b, .delay) == true)
        #expect(h.machine.isIdle)
    }

    @Test func cancelBeforeStartWinsAndIsNotCountedAsUnfinished() {
        var h = Harness()
        let a = h.add("a", startImmediately: false)
        #expect(h.cancel(a) == ["terminate(a,cancelled)"])
        #expect(h.start(a) == [])
        #expect(h.machine.unfinishedCount == 0)
        #expect(h.machine.isIdle)
    }

    // MARK: Holding and batches

    @Test func heldTasksAreReleasedInAddOrderWithAccurateBatchCounts() {
        var h = Harness(interceptors: 1)
        let a = h.add("a")
        #expect(h.last == ["intercept(a,[0])"])
        // Interception is one task at a time: b waits until a's verdict is in.
        let b = h.add("b")
        #expect(h.last == [])
        #expect(h.intercepted(a, [.hold]) == ["intercept(b,[1])"])
        #expect(h.machine.state(of: a) == .pending)
        #expect(h.intercepted(b, [.hold]) == [])
        #expect(h.machine.batchCount(of: 0) == 2)
        let c = h.add("c")
        #expect(h.last == ["intercept(c,[2])"])
        #expect(h.intercepted(c, [.execute]) == ["execute(a#1)", "execute(b#1)", "execute(c#1)"])
        #expect(h.machine.batchCount(of: 0) == 0)
        #expect(h.machine.unfinishedCount == 3)
    }

    @Test func aHeldTaskCanBeCancelledOrTimeOutAndLeavesTheBatch() {
        var h = Harness(interceptors: 1)
        let a = h.add("a")
        h.intercepted(a, [.hold])
        let b = h.add("b", timeout: .seconds(1))
        h.registerTimer(b, .deadline)
        h.intercepted(b, [.hold])
        let c = h.add("c")
        h.intercepted(c, [.hold])
        #expect(h.machine.batchCount(of: 0) == 3)
        #expect(h.cancel(a) == ["terminate(a,cancelled)"])
        #expect(h.fire(b, .deadline) == ["terminate(b,timedOut)"])
        #expect(h.machine.batchCount(of: 0) == 1)
        let d = h.add("d")
        #expect(h.last == ["intercept(d,[1])"])
        #expect(h.intercepted(d, [.execute]) == ["execute(c#1)", "execute(d#1)"])
    }

    @Test func forceExecuteOverridesHoldAndDiscardAndReleasesOnlyItsOwnBatch() {
        var h = Harness(interceptors: 2)
        let a = h.add("a")
        #expect(h.intercepted(a, [.hold, .execute]) == [])
        #expect(h.machine.batchCount(of: 0) == 1)
        // Interceptor 1 forces b through interceptor 0's hold; interceptor 0's batch stays held.
        let b = h.add("b")
        #expect(h.last == ["intercept(b,[1, 0])"])
        #expect(h.intercepted(b, [.hold, .forceExecute]) == ["execute(b#1)"])
        #expect(h.machine.batchCount(of: 0) == 1)
        // forceExecute beats discard too.
        let c = h.add("c")
        #expect(h.intercepted(c, [.discard, .forceExecute]) == ["execute(c#1)"])
        // Interceptor 0 forcing releases its own batch (a first), even over interceptor 1's hold.
        let d = h.add("d")
        #expect(h.intercepted(d, [.forceExecute, .hold]) == ["execute(a#1)", "execute(d#1)"])
        #expect(h.machine.batchCount(of: 0) == 0)
        #expect(h.machine.batchCount(of: 1) == 0)
    }

    @Test func discardBeatsHoldWhichBeatsExecute() {
        var h = Harness(interceptors: 2)
        let a = h.add("a")
        #expect(h.intercepted(a, [.hold, .discard]) == ["terminate(a,discarded)"])
        let b = h.add("b")
        #expect(h.intercepted(b, [.discard, .hold]) == ["terminate(b,discarded)"])
        #expect(h.machine.batchCount(of: 0) == 0)
        #expect(h.machine.batchCount(of: 1) == 0)
        // Held by the first interceptor that said hold.
        let c = h.add("c")
        #expect(h.intercepted(c, [.execute, .hold]) == [])
        #expect(h.machine.batchCount(of: 1) == 1)
        // Interceptor 1 says execute: its batch (c) is released; e is held by interceptor 0.
        let e = h.add("e")
        #expect(h.intercepted(e, [.hold, .execute]) == ["execute(c#1)"])
        #expect(h.machine.batchCount(of: 0) == 1)
        // Interceptor 0 says execute while interceptor 1 discards: the batch is released anyway.
        let f = h.add("f")
        #expect(h.intercepted(f, [.execute, .discard]) == ["terminate(f,discarded)", "execute(e#1)"])
        #expect(h.machine.batchCount(of: 0) == 0)
    }

    // MARK: Cancel and timeout

    @Test func cancelEndsAnExecutingTaskOnceAndItsLateResultIsDropped() {
        var h = Harness()
        let a = h.add("a", timeout: .seconds(3))
        h.registerTimer(a, .deadline)
        #expect(h.cancel(a) == ["cancelExecution(a)", "cancel(deadline:a)", "terminate(a,cancelled)"])
        #expect(h.machine.state(of: a) == .finished)
        #expect(h.machine.runningCount == 0)
        #expect(h.cancel(a) == [])
        #expect(h.executed(a) == [])
        #expect(h.fire(a, .deadline) == [])
        #expect(h.machine.isIdle)
    }

    @Test func aTimeoutEndsAnExecutingTaskOnceAndItsLateResultIsDropped() {
        var h = Harness()
        let a = h.add("a", timeout: .seconds(3))
        #expect(h.last == ["timer(a,deadline,3.0 seconds)", "execute(a#1)"])
        h.registerTimer(a, .deadline)
        #expect(h.fire(a, .deadline) == ["cancelExecution(a)", "terminate(a,timedOut)"])
        #expect(h.executed(a) == [])
        #expect(h.cancel(a) == [])
        #expect(h.fire(a, .deadline) == [])
        #expect(h.machine.isIdle)
    }

    @Test func cancelWhileReactorsAreAskedDropsTheirAnswer() {
        var h = Harness(reactors: [ReactorConfiguration()])
        let a = h.add("a")
        #expect(h.executed(a) == ["evaluate(a#1)"])
        #expect(h.machine.state(of: a) == .executing)
        #expect(h.cancel(a) == ["terminate(a,cancelled)"])
        #expect(h.evaluated(a, matched: [0]) == [])
        #expect(!h.machine.isReacting(0))
        #expect(h.machine.isIdle)
    }

    // MARK: Reactions

    @Test func aRunningReactorIsNotStartedTwiceAndMatchingResultsJoinIt() {
        var h = Harness(reactors: [ReactorConfiguration()])
        let a = h.add("a")
        h.executed(a)
        #expect(h.evaluated(a, matched: [0]) == ["react(0#1)"])
        #expect(h.machine.state(of: a) == .executing)
        #expect(h.registerReaction(0, generation: 1) == false)
        let b = h.add("b")
        h.executed(b)
        #expect(h.evaluated(b, matched: [0]) == [])
        #expect(h.machine.reactionTasks(of: 0) == [a, b])
        // A result that does not match is delivered at once.
        let c = h.add("c")
        h.executed(c)
        #expect(h.evaluated(c, matched: []) == ["deliver(c)"])
        #expect(h.reacted(0, generation: 1) == ["deliver(a)", "deliver(b)"])
        #expect(!h.machine.isReacting(0))
        #expect(h.machine.reactionTasks(of: 0) == [])
        // A stale report changes nothing; the next match starts a new run.
        #expect(h.reacted(0, generation: 1) == [])
        let d = h.add("d")
        h.executed(d)
        #expect(h.evaluated(d, matched: [0]) == ["react(0#2)"])
        #expect(h.registerReaction(0, generation: 1) == true)
    }

    @Test func aSuspendingReactionBlocksNewStartsUntilItEnds() {
        var h = Harness(interceptors: 1, reactors: [ReactorConfiguration(suspendsTaskQueue: true)])
        let a = h.add("a")
        h.intercepted(a, [.execute])
        let running = h.add("running")
        h.intercepted(running, [.execute])
        h.executed(a)
        #expect(h.evaluated(a, matched: [0]) == ["react(0#1)"])
        #expect(h.machine.isSuspended)
        // Tasks added meanwhile are not even intercepted.
        let b = h.add("b")
        let c = h.add("c")
        #expect(h.last == [])
        #expect(h.machine.state(of: b) == .pending)
        // A task that was already executing goes on, and its result is delivered.
        #expect(h.executed(running) == ["evaluate(running#1)"])
        #expect(h.evaluated(running, matched: []) == ["deliver(running)"])
        #expect(h.reacted(0, generation: 1) == ["deliver(a)", "intercept(b,[0])"])
        #expect(!h.machine.isSuspended)
        #expect(h.intercepted(b, [.execute]) == ["execute(b#1)", "intercept(c,[0])"])
        #expect(h.intercepted(c, [.execute]) == ["execute(c#1)"])
    }

    @Test func twoSuspendingReactionsBothHaveToEnd() {
        var h = Harness(reactors: [
            ReactorConfiguration(suspendsTaskQueue: true), ReactorConfiguration(suspendsTaskQueue: true),
        ])
        let a = h.add("a")
        h.executed(a)
        #expect(h.evaluated(a, matched: [0, 1]) == ["react(0#1)", "react(1#2)"])
        h.add("b")
        #expect(h.reacted(1, generation: 2) == [])
        #expect(h.machine.isSuspended)
        #expect(h.reacted(0, generation: 1) == ["deliver(a)", "execute(b#1)"])
    }

    @Test func aRequeueingReactionRunsTheTriggeringTasksOnceMore() {
        var h = Harness(reactors: [ReactorConfiguration(requeuesTask: true)])
        let a = h.add("a")
        let b = h.add("b")
        h.executed(a)
        h.executed(b)
        #expect(h.evaluated(a, matched: [0]) == ["react(0#1)"])
        #expect(h.evaluated(b, matched: [0]) == [])
        #expect(h.reacted(0, generation: 1) == ["execute(a#2)", "execute(b#2)"])
        #expect(h.machine.reactionTasks(of: 0) == [])
        // A report from the first attempt is stale.
        #expect(h.executed(a, attempt: 1) == [])
        #expect(h.executed(a, attempt: 2) == ["evaluate(a#2)"])
        #expect(h.evaluated(a, attempt: 2, matched: []) == ["deliver(a)"])
        #expect(h.executed(b, attempt: 2) == ["evaluate(b#2)"])
        #expect(h.evaluated(b, attempt: 2, matched: []) == ["deliver(b)"])
        #expect(h.machine.isIdle)
    }

    @Test func aRequeuedTaskIsReinterceptedOnlyWhenConfigured() {
        var h = Harness(interceptors: 1, reactors: [
            ReactorConfiguration(requeuesTask: true, reinterceptOnRequeue: true),
            ReactorConfiguration(requeuesTask: true),
        ])
        let a = h.add("a")
        h.intercepted(a, [.execute])
        h.executed(a)
        h.evaluated(a, matched: [0])
        #expect(h.reacted(0, generation: 1) == ["intercept(a,[0])"])
        #expect(h.intercepted(a, [.execute]) == ["execute(a#2)"])
        h.executed(a, attempt: 2)
        #expect(h.evaluated(a, attempt: 2, matched: [1]) == ["react(1#2)"])
        #expect(h.reacted(1, generation: 2) == ["execute(a#3)"])
        // Re-interception may hold the task like any other.
        h.executed(a, attempt: 3)
        h.evaluated(a, attempt: 3, matched: [0])
        #expect(h.reacted(0, generation: 3) == ["intercept(a,[0])"])
        #expect(h.intercepted(a, [.hold]) == [])
        #expect(h.machine.batchCount(of: 0) == 1)
    }

    @Test func aFailedReactionFailsExactlyTheTasksItRequeued() {
        struct Refused: Error, CustomStringConvertible { var description: String { "refused" } }
        var h = Harness(reactors: [ReactorConfiguration(requeuesTask: true), ReactorConfiguration()])
        let a = h.add("a")
        let b = h.add("b")
        let c = h.add("c")
        let d = h.add("d")
        h.executed(a)
        #expect(h.evaluated(a, matched: [0]) == ["react(0#1)"])
        h.registerReaction(0, generation: 1)
        h.executed(b)
        #expect(h.evaluated(b, matched: [1]) == ["react(1#2)"])
        h.executed(c)
        #expect(h.evaluated(c, matched: [0]) == [])
        h.executed(d)
        #expect(h.evaluated(d, matched: [0, 1]) == [])
        #expect(h.machine.reactionTasks(of: 1) == [b, d])
        #expect(h.reacted(0, generation: 1, error: Refused()) == [
            "cancel(reaction:0#1)",
            "terminate(a,reactorFailed(0,refused))",
            "terminate(c,reactorFailed(0,refused))",
            "terminate(d,reactorFailed(0,refused))",
        ])
        #expect(!h.machine.isReacting(0))
        #expect(h.machine.reactionTasks(of: 0) == [])
        #expect(h.machine.reactionTasks(of: 1) == [b])
        // Reactor 1 does not requeue: its failure still delivers the result that triggered it.
        #expect(h.reacted(1, generation: 2, error: Refused()) == ["deliver(b)"])
        #expect(h.machine.isIdle)
    }

    @Test func aTimedOutReactionFailsExactlyTheTasksItRequeuedAndIsCancelled() {
        var h = Harness(reactors: [ReactorConfiguration(timeout: .seconds(1), requeuesTask: true)])
        let a = h.add("a")
        h.executed(a)
        h.evaluated(a, matched: [0])
        #expect(h.registerReaction(0, generation: 1, timer: true) == false)
        #expect(h.reactionTimedOut(0, generation: 1) == [
            "cancel(reactionTimer:0#1)", "cancel(reaction:0#1)", "terminate(a,reactorTimedOut(0))",
        ])
        // The reaction's own late report is stale.
        #expect(h.reacted(0, generation: 1) == [])
        #expect(h.machine.isIdle)
    }

    @Test func theTriggerRecordIsClearedOnSuccessSoALaterFailureSparesEarlierTasks() {
        struct Refused: Error {}
        var h = Harness(reactors: [ReactorConfiguration(requeuesTask: true)])
        let a = h.add("a")
        h.executed(a)
        h.evaluated(a, matched: [0])
        #expect(h.reacted(0, generation: 1) == ["execute(a#2)"])
        #expect(h.machine.reactionTasks(of: 0) == [])
        // a runs again; meanwhile b triggers a second run, which fails: only b fails.
        let b = h.add("b")
        h.executed(b)
        #expect(h.evaluated(b, matched: [0]) == ["react(0#2)"])
        #expect(h.machine.reactionTasks(of: 0) == [b])
        let failed = h.reacted(0, generation: 2, error: Refused())
        #expect(failed.count == 1)
        #expect(failed.first?.hasPrefix("terminate(b,reactorFailed(0,") == true)
        #expect(h.machine.state(of: a) == .executing)
        #expect(h.executed(a, attempt: 2) == ["evaluate(a#2)"])
        #expect(h.evaluated(a, attempt: 2, matched: []) == ["deliver(a)"])
        #expect(h.machine.isIdle)
    }

    @Test func theTriggerRecordIsClearedOnTimeoutToo() {
        var h = Harness(reactors: [ReactorConfiguration(timeout: .seconds(1), requeuesTask: true)])
        let a = h.add("a")
        h.executed(a)
        h.evaluated(a, matched: [0])
        h.reactionTimedOut(0, generation: 1)
        #expect(h.machine.reactionTasks(of: 0) == [])
        let b = h.add("b")
        h.executed(b)
        #expect(h.evaluated(b, matched: [0]) == ["react(0#2)"])
        #expect(h.machine.reactionTasks(of: 0) == [b])
        #expect(h.reacted(0, generation: 2) == ["execute(b#2)"])
    }

    @Test func aTaskCancelledWhileWaitingForAReactionLeavesItsRecord() {
        var h = Harness(reactors: [ReactorConfiguration(requeuesTask: true)])
        let a = h.add("a")
        let b = h.add("b")
        h.executed(a)
        h.evaluated(a, matched: [0])
        h.executed(b)
        h.evaluated(b, matched: [0])
        #expect(h.cancel(a) == ["terminate(a,cancelled)"])
        #expect(h.machine.reactionTasks(of: 0) == [b])
        #expect(h.reacted(0, generation: 1) == ["execute(b#2)"])
    }

    @Test func aTaskWaitsForEveryReactionItTriggered() {
        var h = Harness(reactors: [ReactorConfiguration(), ReactorConfiguration(requeuesTask: true)])
        let a = h.add("a")
        h.executed(a)
        #expect(h.evaluated(a, matched: [0, 1]) == ["react(0#1)", "react(1#2)"])
        #expect(h.reacted(1, generation: 2) == [])
        #expect(h.reacted(0, generation: 1) == ["execute(a#2)"])
    }

    @Test func aResultThatSkipsTheReactorsIsDeliveredAtOnce() {
        var h = Harness(reactors: [ReactorConfiguration()])
        let a = h.add("a")
        #expect(h.executed(a, reactable: false) == ["deliver(a)"])
    }

    // MARK: The direct lane (`value(of:)` with nothing between start and execution)

    @Test func aDirectTaskIsRegisteredExecutingAndItsOwnerDeliversItsResult() throws {
        var h = Harness()
        let addedA = h.addExecuting("a")
        let (a, deadline) = try #require(addedA)
        #expect(deadline == nil)
        #expect(h.machine.state(of: a) == .executing)
        #expect(h.machine.runningCount == 1)
        #expect(h.machine.unfinishedCount == 1)
        #expect(h.machine.addWaiter(1) == false)
        #expect(h.directExecuted(a) == (true, []))
        #expect(h.machine.state(of: a) == .finished)
        #expect(h.machine.runningCount == 0)
        // The owner's delivery is waited for like a `deliver` action's.
        #expect(h.machine.pendingDeliveries == 1)
        #expect(h.returnAll() == ["resume([1])"])
        #expect(h.directExecuted(a) == (false, []))
        #expect(h.machine.isIdle)
    }

    @Test func theDirectLaneIsRefusedWhenSomethingStandsBetweenStartAndExecution() throws {
        var intercepted = Harness(interceptors: 1)
        #expect(intercepted.addExecuting("a") == nil)
        var reacted = Harness(reactors: [ReactorConfiguration()])
        #expect(reacted.addExecuting("a") == nil)
        #expect(intercepted.machine.isIdle && reacted.machine.isIdle)
        // No free slot: refused, nothing registered; the task queued the general way starts
        // when the direct one ends.
        var limited = Harness(maximumConcurrentTasks: 1)
        let addedA = limited.addExecuting("a")
        let (a, _) = try #require(addedA)
        #expect(limited.addExecuting("b") == nil)
        #expect(limited.machine.unfinishedCount == 1)
        let b = limited.add("b")
        #expect(limited.last == [])
        #expect(limited.directExecuted(a) == (true, ["execute(b#1)"]))
        #expect(limited.executed(b) == ["deliver(b)"])
        limited.returnAll()
        #expect(limited.machine.isIdle)
    }

    @Test func aDirectTaskEndsOnceByCancelDeadlineOrShutdownAndItsLateResultIsDropped() throws {
        var h = Harness()
        let addedA = h.addExecuting("a", timeout: .seconds(3))
        let (a, deadline) = try #require(addedA)
        #expect(deadline == .seconds(3))
        #expect(h.registerTimer(a, .deadline) == false)
        #expect(h.cancel(a) == ["cancelExecution(a)", "cancel(deadline:a)", "terminate(a,cancelled)"])
        #expect(h.directExecuted(a) == (false, []))
        #expect(h.fire(a, .deadline) == [])

        let addedB = h.addExecuting("b", timeout: .seconds(3))
        let (b, _) = try #require(addedB)
        h.registerTimer(b, .deadline)
        #expect(h.fire(b, .deadline) == ["cancelExecution(b)", "terminate(b,timedOut)"])
        #expect(h.directExecuted(b) == (false, []))

        // A result before the deadline cancels the deadline's timer.
        let addedC = h.addExecuting("c", timeout: .seconds(3))
        let (c, _) = try #require(addedC)
        h.registerTimer(c, .deadline)
        #expect(h.directExecuted(c) == (true, ["cancel(deadline:c)"]))
        #expect(h.fire(c, .deadline) == [])

        let addedD = h.addExecuting("d")
        let (d, _) = try #require(addedD)
        #expect(h.render(h.machine.cancelAll()) == ["cancelExecution(d)", "terminate(d,cancelled)"])
        #expect(h.directExecuted(d) == (false, []))
        #expect(h.machine.runningCount == 0)
        #expect(h.machine.unfinishedCount == 0)
    }

    // MARK: The direct lane with interceptors (the owner intercepts, then spawns)

    @Test func aTaskItsOwnerInterceptsExecutesAtOnceWhenTheVerdictLetsIt() throws {
        var h = Harness(interceptors: 1)
        let addedA = h.addIntercepting("a", timeout: .seconds(3))
        let (a, counts, deadline) = try #require(addedA)
        #expect(counts == [0])
        #expect(deadline == .seconds(3))
        #expect(h.machine.state(of: a) == .pending)
        #expect(h.machine.unfinishedCount == 1)
        // One interception at a time: the next task queues behind it, the general way.
        #expect(h.addIntercepting("b") == nil)
        let b = h.add("b")
        #expect(h.last == [])
        #expect(h.directIntercepted(a, [.execute]) == (true, ["intercept(b,[0])"]))
        #expect(h.machine.state(of: a) == .executing)
        #expect(h.machine.runningCount == 1)
        #expect(h.registerTimer(a, .deadline) == false)
        #expect(h.directExecuted(a) == (true, ["cancel(deadline:a)"]))
        #expect(h.intercepted(b, [.execute]) == ["execute(b#1)"])
        #expect(h.executed(b) == ["deliver(b)"])
        h.returnAll()
        #expect(h.machine.isIdle)
    }

    @Test func aVerdictThatHoldsDiscardsOrReleasesABatchTakesTheGeneralWay() throws {
        var h = Harness(interceptors: 1)
        let a = try h.addInterceptingOrFail("a")
        #expect(h.directIntercepted(a, [.hold]) == (false, []))
        #expect(h.machine.batchCount(of: 0) == 1)
        // Held tasks released by a verdict go first: the released task and this one queue.
        let addedB = h.addIntercepting("b")
        let (b, counts, _) = try #require(addedB)
        #expect(counts == [1])
        #expect(h.directIntercepted(b, [.execute]) == (false, ["execute(a#1)", "execute(b#1)"]))
        let c = try h.addInterceptingOrFail("c")
        #expect(h.directIntercepted(c, [.discard]) == (false, ["terminate(c,discarded)"]))
        h.executed(a)
        h.executed(b)
        h.returnAll()
        #expect(h.machine.isIdle)
    }

    @Test func aTerminationDuringTheOwnersInterceptionAppliesWhenTheVerdictReturns() throws {
        var h = Harness(interceptors: 1)
        let a = try h.addInterceptingOrFail("a")
        #expect(h.cancel(a) == [])
        #expect(h.directIntercepted(a, [.execute]) == (false, ["terminate(a,cancelled)"]))
        #expect(h.directExecuted(a) == (false, []))
        h.returnAll()
        #expect(h.machine.isIdle)
    }

    @Test func theOwnersInterceptionIsRefusedWhenSomethingElseStandsBetween() throws {
        var plain = Harness()
        #expect(plain.addIntercepting("a") == nil)
        var reacted = Harness(interceptors: 1, reactors: [ReactorConfiguration()])
        #expect(reacted.addIntercepting("a") == nil)
        #expect(plain.machine.isIdle && reacted.machine.isIdle)
        // No free slot: refused; the task added the general way is intercepted when one frees.
        var limited = Harness(interceptors: 1, maximumConcurrentTasks: 1)
        let a = try limited.addInterceptingOrFail("a")
        #expect(limited.directIntercepted(a, [.execute]) == (true, []))
        #expect(limited.addIntercepting("b") == nil)
        let b = limited.add("b")
        #expect(limited.last == [])
        #expect(limited.directExecuted(a) == (true, ["intercept(b,[0])"]))
        #expect(limited.intercepted(b, [.execute]) == ["execute(b#1)"])
        limited.executed(b)
        limited.returnAll()
        #expect(limited.machine.isIdle)
    }

    // MARK: Concurrency limit

    @Test func theConcurrencyLimitIsHonoured() {
        var h = Harness(maximumConcurrentTasks: 2)
        let a = h.add("a")
        let b = h.add("b")
        let c = h.add("c")
        let d = h.add("d")
        #expect(h.machine.runningCount == 2)
        #expect(h.machine.state(of: c) == .pending)
        #expect(h.executed(a) == ["deliver(a)", "execute(c#1)"])
        #expect(h.cancel(b) == ["cancelExecution(b)", "terminate(b,cancelled)", "execute(d#1)"])
        #expect(h.machine.runningCount == 2)
        h.executed(c)
        h.executed(d)
        #expect(h.machine.runningCount == 0)
        #expect(h.machine.isIdle)
    }

    @Test func theConcurrencyLimitAlsoDelaysInterception() {
        var h = Harness(interceptors: 1, maximumConcurrentTasks: 1)
        let a = h.add("a")
        #expect(h.intercepted(a, [.execute]) == ["execute(a#1)"])
        h.add("b")
        #expect(h.last == [])
        #expect(h.executed(a) == ["deliver(a)", "intercept(b,[0])"])
    }

    @Test func aReactingTaskDoesNotHoldAnExecutionSlot() {
        var h = Harness(reactors: [ReactorConfiguration()], maximumConcurrentTasks: 1)
        let a = h.add("a")
        h.add("b")
        #expect(h.executed(a) == ["evaluate(a#1)", "execute(b#1)"])
        #expect(h.evaluated(a, matched: [0]) == ["react(0#1)"])
        #expect(h.machine.runningCount == 1)
    }

    // MARK: Waiting for everything

    @Test func aWaiterArrivingWhileACompletionRunsWaitsForItToReturn() {
        var h = Harness()
        let a = h.add("a")
        #expect(h.executed(a) == ["deliver(a)"])
        // a is finished, but its completion is still running.
        #expect(h.machine.unfinishedCount == 0)
        #expect(h.machine.addWaiter(1) == false)
        #expect(h.returnAll() == ["resume([1])"])
        // A cancelled task that never started is not waited for, but its completion is.
        let b = h.add("b", startImmediately: false)
        #expect(h.cancel(b) == ["terminate(b,cancelled)"])
        #expect(h.machine.addWaiter(2) == false)
        #expect(h.returnAll() == ["resume([2])"])
    }

    @Test func waitersCoverDelayedHeldAndRequeuedTasksButNotUnstartedOnes() {
        var h = Harness(interceptors: 1, reactors: [ReactorConfiguration(requeuesTask: true)])
        let unstarted = h.add("unstarted", startImmediately: false)
        // Nothing started: a waiter is resumed at once (not stored).
        #expect(h.machine.addWaiter(1) == true)
        #expect(h.machine.waiterCount == 0)
        let delayed = h.add("delayed", delay: .seconds(1))
        let requeued = h.add("requeued")
        #expect(h.intercepted(requeued, [.execute]) == ["execute(requeued#1)"])
        let held = h.add("held")
        #expect(h.intercepted(held, [.hold]) == [])
        #expect(h.machine.unfinishedCount == 3)
        #expect(h.machine.addWaiter(2) == false)
        #expect(h.machine.addWaiter(3) == false)
        #expect(h.machine.removeWaiter(3) == true)
        #expect(h.machine.removeWaiter(3) == false)
        h.executed(requeued)
        h.evaluated(requeued, matched: [0])
        #expect(h.reacted(0, generation: 1) == ["execute(requeued#2)"])
        #expect(h.machine.unfinishedCount == 3)
        h.executed(requeued, attempt: 2)
        #expect(h.evaluated(requeued, attempt: 2, matched: []) == ["deliver(requeued)"])
        #expect(h.fire(delayed, .delay) == ["intercept(delayed,[1])"])
        #expect(h.intercepted(delayed, [.execute]) == ["execute(held#1)", "execute(delayed#1)"])
        h.executed(held)
        #expect(h.evaluated(held, matched: []) == ["deliver(held)"])
        h.executed(delayed)
        #expect(h.evaluated(delayed, matched: []) == ["deliver(delayed)"])
        // Every task ended, but waiters also wait for the completions to return.
        #expect(h.machine.unfinishedCount == 0)
        #expect(h.machine.pendingDeliveries == 3)
        #expect(h.machine.waiterCount == 1)
        #expect(h.returnAll() == ["resume([2])"])
        #expect(h.machine.waiterCount == 0)
        #expect(h.machine.addWaiter(5) == true)
        #expect(h.machine.unfinishedCount == 0)
        #expect(h.machine.state(of: unstarted) == .pending)
        #expect(!h.machine.isIdle)
        #expect(h.cancel(unstarted) == ["terminate(unstarted,cancelled)"])
        #expect(h.machine.isIdle)
    }
}

/// Drives a `TaskManagerStateMachine<String, String>` and renders its actions as strings.
struct TaskManagerMachineHarness {
    typealias Machine = TaskManagerStateMachine<String, String>
    typealias Action = Machine.Action

    var machine: Machine
    /// Task names by identifier, to render identifiers as names.
    private(set) var names: [Int: String] = [:]
    /// The rendered actions of the last event.
    private(set) var last: [String] = []

    init(interceptors: Int = 0, reactors: [ReactorConfiguration] = [], maximumConcurrentTasks: Int? = nil) {
        machine = Machine(
            interceptorCount: interceptors, reactorConfigurations: reactors, maximumConcurrentTasks: maximumConcurrentTasks
        )
    }

    func name(_ id: Int) -> String { names[id] ?? "#\(id)" }

    func render(_ actions: some Sequence<Action>) -> [String] {
        actions.map { action in
            switch action {
            case .startTimer(let id, let kind, let duration):
                return "timer(\(name(id)),\(kind),\(duration))"
            case .intercept(let id, _, let counts):
                return "intercept(\(name(id)),\(Array(counts)))"
            case .execute(let id, _, let attempt):
                return "execute(\(name(id))#\(attempt))"
            case .evaluateReactors(let id, _, let attempt):
                return "evaluate(\(name(id))#\(attempt))"
            case .deliver(let payload):
                return "deliver(\(payload))"
            case .terminate(let payload, let reason):
                return "terminate(\(payload),\(Self.render(reason)))"
            case .startReaction(let reactor, let generation):
                return "react(\(reactor)#\(generation))"
            case .cancelExecution(let payload):
                return "cancelExecution(\(payload))"
            case .cancel(let job):
                return "cancel(\(job))"
            case .resumeWaiters(let waiters):
                return "resume(\(Array(waiters)))"
            }
        }
    }

    static func render(_ reason: Machine.Termination) -> String {
        switch reason {
        case .cancelled: return "cancelled"
        case .timedOut: return "timedOut"
        case .discarded: return "discarded"
        case .reactorFailed(let reactor, let error): return "reactorFailed(\(reactor),\(error))"
        case .reactorTimedOut(let reactor): return "reactorTimedOut(\(reactor))"
        }
    }

    /// Deliveries (`deliver`/`terminate`) emitted whose return has not been reported.
    private(set) var outstandingDeliveries = 0

    private mutating func record(_ actions: some Sequence<Action>) -> [String] {
        last = render(actions)
        outstandingDeliveries += last.filter { $0.hasPrefix("deliver(") || $0.hasPrefix("terminate(") }.count
        return last
    }

    /// Reports that every outstanding delivery's completion returned; returns the actions.
    @discardableResult
    mutating func returnAll() -> [String] {
        var all: [String] = []
        while outstandingDeliveries > 0 {
            outstandingDeliveries -= 1
            all += render(machine.deliveriesReturned(1))
        }
        last = all
        return all
    }

    @discardableResult
    mutating func add(
        _ name: String, startImmediately: Bool = true, delay: Duration? = nil, timeout: Duration? = nil
    ) -> Int {
        let (id, actions) = machine.add(
            payload: name, startImmediately: startImmediately, delay: delay, timeout: timeout
        )
        names[id] = name
        _ = record(actions)
        return id
    }

    /// Adds a task through the direct lane; `nil` when the machine refuses it.
    mutating func addExecuting(_ name: String, timeout: Duration? = nil) -> (id: Int, deadline: Duration?)? {
        guard let (id, deadline) = machine.addExecuting(payload: name, timeout: timeout) else { return nil }
        names[id] = name
        last = []
        return (id, deadline)
    }

    /// Adds a task that the owner intercepts itself; `nil` when the machine refuses it.
    mutating func addIntercepting(
        _ name: String, timeout: Duration? = nil
    ) -> (id: Int, batchCounts: [Int], deadline: Duration?)? {
        guard let added = machine.addIntercepting(payload: name, timeout: timeout) else { return nil }
        names[added.id] = name
        last = []
        return added
    }

    /// Adds a task that the owner intercepts itself; records a test failure and throws when the
    /// machine refuses it. Returns its identifier.
    mutating func addInterceptingOrFail(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int {
        let added = addIntercepting(name)
        return try #require(added, sourceLocation: sourceLocation).id
    }

    /// Reports the owner's interception of `id` (one command per interceptor).
    mutating func directIntercepted(_ id: Int, _ commands: [InterceptCommand]) -> (execute: Bool, actions: [String]) {
        var verdict = InterceptVerdict()
        for (index, command) in commands.enumerated() {
            verdict.record(command, from: index, batchCount: machine.batchCount(of: index))
        }
        let (execute, actions) = machine.directInterceptionFinished(id: id, verdict: verdict)
        return (execute, record(actions ?? []))
    }

    /// Reports the end of a direct task's execution; a delivery it grants counts as outstanding.
    mutating func directExecuted(_ id: Int) -> (deliver: Bool, actions: [String]) {
        let (deliver, actions) = machine.directExecutionFinished(id: id)
        if deliver { outstandingDeliveries += 1 }
        return (deliver, record(actions))
    }

    @discardableResult
    mutating func start(_ id: Int) -> [String] { record(machine.start(id: id)) }

    @discardableResult
    mutating func cancel(_ id: Int) -> [String] { record(machine.cancel(id: id)) }

    @discardableResult
    mutating func intercepted(_ id: Int, _ commands: [InterceptCommand]) -> [String] {
        var verdict = InterceptVerdict()
        for (index, command) in commands.enumerated() {
            verdict.record(command, from: index, batchCount: machine.batchCount(of: index))
        }
        return record(machine.interceptionFinished(id: id, verdict: verdict))
    }

    /// Registers the job `"<kind>:<name>"`; returns whether the machine wants it cancelled.
    @discardableResult
    mutating func registerTimer(_ id: Int, _ kind: Machine.TimerKind) -> Bool {
        machine.registerTimer(id: id, kind: kind, job: "\(kind):\(name(id))")
    }

    @discardableResult
    mutating func fire(_ id: Int, _ kind: Machine.TimerKind) -> [String] {
        record(machine.timerFired(id: id, kind: kind))
    }

    @discardableResult
    mutating func executed(_ id: Int, attempt: Int = 1, reactable: Bool = true) -> [String] {
        record(machine.executionFinished(id: id, attempt: attempt, reactable: reactable))
    }

    @discardableResult
    mutating func evaluated(_ id: Int, attempt: Int = 1, matched: [Int]) -> [String] {
        record(machine.reactorsEvaluated(id: id, attempt: attempt, matched: matched))
    }

    /// Registers the jobs `"reaction:<reactor>#<generation>"` and, when `timer`, `"reactionTimer:…"`.
    @discardableResult
    mutating func registerReaction(_ reactor: Int, generation: Int, timer: Bool = false) -> Bool {
        machine.registerReaction(
            reactor: reactor, generation: generation, job: "reaction:\(reactor)#\(generation)",
            timer: timer ? "reactionTimer:\(reactor)#\(generation)" : nil
        )
    }

    @discardableResult
    mutating func reacted(_ reactor: Int, generation: Int, error: (any Error)? = nil) -> [String] {
        record(machine.reactionFinished(reactor: reactor, generation: generation, error: error))
    }

    @discardableResult
    mutating func reactionTimedOut(_ reactor: Int, generation: Int) -> [String] {
        record(machine.reactionTimedOut(reactor: reactor, generation: generation))
    }
}
