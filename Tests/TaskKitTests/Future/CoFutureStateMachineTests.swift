import Testing
@testable import TaskKit

/// Every transition of CoFuture's state machine, checked on the value: no threads, no locks, no
/// futures running. Callbacks are `.result` closures tagged by the integer they append to a
/// log, so a batch's order can be read back by running it.
@Suite struct CoFutureStateMachineTests {
    typealias Machine = CoFutureStateMachine<Int>

    /// A callback that appends `tag` to `log` when run.
    static func callback(_ tag: Int, _ log: Log<Int>) -> FutureCallback<Int> {
        .result { _ in log.append(tag) }
    }

    /// Registers callbacks tagged `tags`, each logging its tag into `log`.
    static func register(_ tags: [Int], on machine: inout Machine, log: Log<Int>) {
        for tag in tags {
            let action = machine.register(callback(tag, log))
            guard case .stored = action else {
                Issue.record("callback \(tag) was not stored")
                return
            }
        }
    }

    /// Runs `batch` (moving its callbacks out, like the future does).
    static func run(_ batch: inout CallbackBatch<Int>) {
        var queue = DrainQueue()
        let all = [batch.first.take(), batch.second.take(), batch.third.take()].compactMap { $0 }
            + (batch.rest.take() ?? [])
        for callback in all { callback.run(.success(0), into: &queue) }
    }

    static func isCompleted(_ action: Machine.CompleteAction) -> Bool {
        if case .completed = action { return true }
        return false
    }

    // MARK: Registering and completing

    @Test func aPendingFutureStoresCallbacksAndHandsThemOutInOrderOnCompletion() {
        var machine = Machine(completed: false)
        let log = Log<Int>()
        Self.register([1, 2, 3, 4, 5], on: &machine, log: log)
        #expect(machine.phase == .pending)

        var batch = CallbackBatch<Int>()
        let completed = Self.isCompleted(machine.complete(takingBatch: true, into: &batch))
        #expect(completed)
        #expect(machine.phase == .draining)
        #expect(batch.count == 5)
        Self.run(&batch)
        #expect(log.elements == [1, 2, 3, 4, 5])
        #expect(machine.callbacks.isEmpty)
    }

    @Test func completingWithNoCallbacksAndTakingTheBatchSettlesAtOnce() {
        var machine = Machine(completed: false)
        var batch = CallbackBatch<Int>()
        let completed = Self.isCompleted(machine.complete(takingBatch: true, into: &batch))
        #expect(completed)
        #expect(machine.phase == .settled)
        #expect(batch.count == 0)
    }

    @Test func completingWithoutTakingTheBatchLeavesItForTheDrain() {
        var machine = Machine(completed: false)
        let log = Log<Int>()
        Self.register([1, 2], on: &machine, log: log)
        var batch = CallbackBatch<Int>()
        let completed = Self.isCompleted(machine.complete(takingBatch: false, into: &batch))
        #expect(completed)
        #expect(machine.phase == .draining)
        #expect(batch.count == 0)

        let hasBatch = machine.takeNextBatch(&batch)
        #expect(hasBatch)
        Self.run(&batch)
        #expect(log.elements == [1, 2])
        let hasAnother = machine.takeNextBatch(&batch)
        #expect(!hasAnother)
        #expect(machine.phase == .settled)
    }

    @Test func aDrainWithNothingLeftSettlesWithoutABatchAndOneWithCallbacksLeftDoesNot() {
        var machine = Machine(completed: false)
        let log = Log<Int>()
        var batch = CallbackBatch<Int>()
        _ = machine.complete(takingBatch: false, into: &batch)
        Self.register([1], on: &machine, log: log)
        let settledEarly = machine.settleIfDrained()
        #expect(!settledEarly)
        #expect(machine.phase == .draining)

        let hasBatch = machine.takeNextBatch(&batch)
        #expect(hasBatch)
        Self.run(&batch)
        let settled = machine.settleIfDrained()
        #expect(settled)
        #expect(machine.phase == .settled)
        let stillSettled = machine.settleIfDrained()
        #expect(stillSettled)
        #expect(log.elements == [1])
    }

    @Test func theFirstCompletionWinsAndLaterOnesAreIgnored() {
        var machine = Machine(completed: false)
        var batch = CallbackBatch<Int>()
        let completed = Self.isCompleted(machine.complete(takingBatch: true, into: &batch))
        #expect(completed)
        guard case .ignored = machine.complete(takingBatch: true, into: &batch) else {
            Issue.record("a second completion was not ignored")
            return
        }
        var created = Machine(completed: true)
        guard case .ignored = created.complete(takingBatch: false, into: &batch) else {
            Issue.record("completing a future created completed was not ignored")
            return
        }
    }

    @Test func callbacksRegisteredWhileDrainingQueueBehindAndComeOutInTheNextBatch() {
        var machine = Machine(completed: false)
        let log = Log<Int>()
        Self.register([1], on: &machine, log: log)
        var batch = CallbackBatch<Int>()
        _ = machine.complete(takingBatch: true, into: &batch)
        // While the first batch runs, two more callbacks arrive: stored, not run at once.
        Self.register([2, 3], on: &machine, log: log)
        Self.run(&batch)
        let hasBatch = machine.takeNextBatch(&batch)
        #expect(hasBatch)
        Self.run(&batch)
        let hasAnother = machine.takeNextBatch(&batch)
        #expect(!hasAnother)
        #expect(log.elements == [1, 2, 3])
        #expect(machine.phase == .settled)
    }

    @Test func aSettledFutureHandsANewCallbackBackToRunNow() {
        var machine = Machine(completed: true)
        let log = Log<Int>()
        guard case .runNow(let callback) = machine.register(Self.callback(7, log)) else {
            Issue.record("a callback on a settled future was stored")
            return
        }
        var queue = DrainQueue()
        callback.run(.success(0), into: &queue)
        #expect(log.elements == [7])
        #expect(machine.callbacks.isEmpty)
    }

    @Test(arguments: [0, 1, 2, 3, 4, 9])
    func theInlineSlotsAndTheOverflowKeepRegistrationOrder(count: Int) {
        var machine = Machine(completed: false)
        let log = Log<Int>()
        Self.register(Array(0..<count), on: &machine, log: log)
        var batch = CallbackBatch<Int>()
        _ = machine.complete(takingBatch: true, into: &batch)
        #expect(batch.count == count)
        #expect((batch.rest == nil) == (count <= 3))
        Self.run(&batch)
        #expect(log.elements == Array(0..<count))
    }

    // MARK: Cancelling and the upstream link

    @Test func cancellingAPendingFutureHandsOutItsLinkAndLeavesTheCallbacksToDrain() {
        let source = CoPromise<Int>()
        var machine = Machine(completed: false, upstream: .strong(source))
        let log = Log<Int>()
        Self.register([1], on: &machine, log: log)
        guard case .cancelled(let next) = machine.cancel(), case .strong(let object) = next else {
            Issue.record("cancel did not hand out the strong link")
            return
        }
        #expect(ObjectIdentifier(object) == ObjectIdentifier(source))
        #expect(machine.phase == .draining)
        guard case .none = machine.upstream else {
            Issue.record("the link was not cleared")
            return
        }
        var batch = CallbackBatch<Int>()
        let hasBatch = machine.takeNextBatch(&batch)
        #expect(hasBatch)
        Self.run(&batch)
        #expect(log.elements == [1])
    }

    @Test func cancellingACompletedFutureDoesNothing() {
        var machine = Machine(completed: true)
        guard case .ignored = machine.cancel() else {
            Issue.record("cancelling a completed future did something")
            return
        }
        #expect(machine.phase == .settled)
    }

    @Test func completingHandsOutTheLinkToRelease() {
        let source = CoPromise<Int>()
        var machine = Machine(completed: false, upstream: .strong(source))
        var batch = CallbackBatch<Int>()
        guard case .completed(let released) = machine.complete(takingBatch: true, into: &batch),
            case .strong(let object) = released
        else {
            Issue.record("completion did not hand out the link")
            return
        }
        #expect(ObjectIdentifier(object) == ObjectIdentifier(source))
    }

    @Test func relinkingReplacesTheLinkWhilePendingAndReturnsTheOldOne() {
        let first = CoPromise<Int>()
        let second = CoPromise<Int>()
        var machine = Machine(completed: false, upstream: .strong(first))
        let (pending, released) = machine.relink(.strong(second))
        #expect(pending)
        guard case .strong(let old) = released, case .strong(let new) = machine.upstream else {
            Issue.record("relink did not swap the links")
            return
        }
        #expect(ObjectIdentifier(old) == ObjectIdentifier(first))
        #expect(ObjectIdentifier(new) == ObjectIdentifier(second))

        var batch = CallbackBatch<Int>()
        _ = machine.complete(takingBatch: true, into: &batch)
        let (stillPending, handedBack) = machine.relink(.weak)
        #expect(!stillPending)
        guard case .weak = handedBack, case .none = machine.upstream else {
            Issue.record("relinking a completed future changed its link")
            return
        }
    }

    // MARK: Abandonment

    @Test func abandoningAPendingFutureHandsOutEveryCallback() {
        var machine = Machine(completed: false)
        let log = Log<Int>()
        Self.register([1, 2, 3, 4], on: &machine, log: log)
        var batch = CallbackBatch<Int>()
        let hadCallbacks = machine.abandon(into: &batch)
        #expect(hadCallbacks)
        #expect(machine.phase == .settled)
        Self.run(&batch)
        #expect(log.elements == [1, 2, 3, 4])
    }

    @Test func abandoningACompletedFutureHandsOutNothing() {
        var machine = Machine(completed: true)
        var batch = CallbackBatch<Int>()
        let hadCallbacks = machine.abandon(into: &batch)
        #expect(!hadCallbacks)
        #expect(batch.count == 0)
    }
}

extension CallbackBatch {
    /// How many callbacks the batch holds.
    var count: Int {
        (first == nil ? 0 : 1) + (second == nil ? 0 : 1) + (third == nil ? 0 : 1) + (rest?.count ?? 0)
    }
}
