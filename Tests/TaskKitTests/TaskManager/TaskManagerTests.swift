import Dispatch
import Testing
@testable import TaskKit
import TaskKitTestSupport
import TaskKitTesting

@Suite struct TaskManagerTests {
    // MARK: Starting

    @Test func aTaskAddedWithDefaultsRunsAndDeliversItsResult() async throws {
        let manager = TaskManager()
        let done = TaskManagerTestCompletions<Int>()
        let task = TaskManagerTestTask<Int> { _ in 42 }
        let handle = manager.add(task: task, completion: done.callback())
        await done.waitFor(1)
        #expect(tmDescribe(done.result(0)) == "success(42)")
        #expect(handle.state == .finished)
        #expect(task.executions.count == 1)
    }

    @Test func bothStylesOfTaskRun() async throws {
        let manager = TaskManager()
        #expect(try await manager.value(of: TaskManagerTestCallbackTask(5)) == 5)
        #expect(try await manager.value(of: TaskManagerTestTask<String> { _ in "async" }) == "async")
        // The callback task's second completion call is ignored.
        #expect(try await TaskManagerTestCallbackTask(9).execute() == 9)
    }

    @Test func startImmediatelyFalseWaitsForStartAndStartIsIdempotent() async throws {
        let manager = TaskManager()
        let done = TaskManagerTestCompletions<Int>()
        let task = TaskManagerTestTask<Int> { _ in 1 }
        let handle = manager.add(task: task, startImmediately: false, completion: done.callback())
        #expect(handle.state == .pending)
        // A task never started is not waited for.
        await manager.waitTillAllTasksFinished()
        #expect(task.executions.count == 0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<100 { group.addTask { handle.start() } }
        }
        await done.waitFor(1)
        handle.start()
        await manager.waitTillAllTasksFinished()
        #expect(task.executions.count == 1)
        #expect(done.count == 1)
        #expect(handle.state == .finished)
    }

    @Test func delayedStartWaitsForTheClock() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let done = TaskManagerTestCompletions<Int>()
        let task = TaskManagerTestTask<Int> { _ in 7 }
        let handle = manager.add(task: task, after: .seconds(5), completion: done.callback())
        await clock.waitForSleepers(count: 1)
        #expect(handle.state == .pending)
        clock.advance(by: .seconds(4))
        #expect(task.executions.count == 0)
        #expect(handle.state == .pending)
        clock.advance(by: .seconds(1))
        await done.waitFor(1)
        #expect(tmDescribe(done.result(0)) == "success(7)")
        #expect(task.executions.count == 1)
    }

    @Test func delayedStartOfAHandleStartedLater() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let task = TaskManagerTestTask<Int> { _ in 3 }
        let done = TaskManagerTestCompletions<Int>()
        let handle = manager.add(task: task, startImmediately: false, after: .seconds(2), completion: done.callback())
        #expect(clock.sleeperCount == 0)
        handle.start()
        handle.start()
        await clock.waitForSleepers(count: 1)
        #expect(clock.totalSleeps == 1)
        clock.advance(by: .seconds(2))
        await done.waitFor(1)
        #expect(task.executions.count == 1)
    }

    @Test func identifiersAreUniqueAndIncreasing() async {
        let manager = TaskManager()
        let ids = TaskManagerTestLog<Int>()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<500 {
                group.addTask {
                    let handle = manager.add(task: TaskManagerTestTask<Int> { _ in 0 }, startImmediately: false)
                    ids.append(handle.identifier)
                }
            }
        }
        #expect(Set(ids.all) == Set(1...500))
        let first = manager.add(task: TaskManagerTestTask<Int> { _ in 0 }, startImmediately: false)
        #expect(first.identifier == 501)
        #expect(first == TaskHandle(identifier: 501, storage: manager.storage))
        #expect(first != TaskHandle(identifier: 501, storage: TaskManager().storage))
    }

    // MARK: Cancel

    @Test func cancelRunsDidCancelThenCompletesOnceAndDropsTheLateResult() async throws {
        let manager = TaskManager()
        let gate = TestGate()
        let returned = TestGate()
        let done = TaskManagerTestCompletions<Int>()
        let task = TaskManagerTestTask<Int> { _ in
            await gate.wait()  // ignores cancellation on purpose
            await returned.wait()
            return 1
        }
        let handle = manager.add(task: task) { result in
            // didCancel ran before the completion.
            #expect(task.cancellations.all == ["cancelled"])
            done.record(0, result)
        }
        await gate.waitForArrivals(1)
        #expect(handle.state == .executing)
        handle.cancel()
        handle.cancel()
        await done.waitFor(1)
        #expect(tmDescribe(done.result(0)) == "cancelled")
        #expect(handle.state == .finished)
        gate.open()
        await returned.waitForArrivals(1)
        returned.open()
        for _ in 0..<100 { await Task.yield() }
        #expect(done.count == 1)
        #expect(task.cancellations.all == ["cancelled"])
        #expect(manager.inspect { $0.isIdle })
    }

    @Test func cancelCancelsTheSwiftTaskRunningTheTask() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let observed = TaskManagerTestLog<String>()
        let task = TaskManagerTestTask<Int> { _ in
            do {
                try await clock.sleep(for: .seconds(1000))
            } catch {
                observed.append("\(type(of: error))")
                throw error
            }
            return 1
        }
        let done = TaskManagerTestCompletions<Int>()
        let handle = manager.add(task: task, completion: done.callback())
        await clock.waitForSleepers(count: 1)
        handle.cancel()
        await done.waitFor(1)
        await eventually("body saw cancellation") { observed.count == 1 }
        #expect(observed.all == ["CancellationError"])
        #expect(tmDescribe(done.result(0)) == "cancelled")
    }

    @Test func cancelBeforeStartWins() async throws {
        let manager = TaskManager()
        let done = TaskManagerTestCompletions<Int>()
        let task = TaskManagerTestTask<Int> { _ in 1 }
        let handle = manager.add(task: task, startImmediately: false, completion: done.callback())
        handle.cancel()
        handle.start()
        await done.waitFor(1)
        await manager.waitTillAllTasksFinished()
        #expect(tmDescribe(done.result(0)) == "cancelled")
        #expect(task.cancellations.all == ["cancelled"])
        #expect(task.executions.count == 0)
    }

    @Test func cancellingADelayedTaskStopsItsTimer() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let done = TaskManagerTestCompletions<Int>()
        let task = TaskManagerTestTask<Int> { _ in 1 }
        let handle = manager.add(task: task, after: .seconds(10), completion: done.callback())
        await clock.waitForSleepers(count: 1)
        handle.cancel()
        await done.waitFor(1)
        await eventually("delay timer cancelled") { clock.sleeperCount == 0 }
        clock.advance(by: .seconds(20))
        await manager.waitTillAllTasksFinished()
        #expect(task.executions.count == 0)
        #expect(tmDescribe(done.result(0)) == "cancelled")
    }

    // MARK: Timeout

    @Test func timeoutRunsDidCancelThenCompletesWithTimedOut() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let observed = TaskManagerTestLog<String>()
        let task = TaskManagerTestTask<Int> { _ in
            do {
                try await clock.sleep(for: .seconds(1000))
            } catch {
                observed.append("cancelled")
                throw error
            }
            return 1
        }
        let done = TaskManagerTestCompletions<Int>()
        let handle = manager.add(task: task, timeout: .seconds(3)) { result in
            #expect(task.cancellations.all == ["timedOut"])
            done.record(0, result)
        }
        await clock.waitForSleepers(count: 2)  // the deadline and the body
        clock.advance(by: .seconds(2))
        #expect(handle.state == .executing)
        clock.advance(by: .seconds(1))
        await done.waitFor(1)
        #expect(tmDescribe(done.result(0)) == "timedOut")
        await eventually("body cancelled") { observed.count == 1 }
        #expect(done.count == 1)
    }

    @Test func theTasksOwnTimeoutAppliesAndAddsTimeoutOverridesIt() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let done = TaskManagerTestCompletions<Int>()
        let own = TaskManagerTestTask<Int>("own", timeout: .seconds(5)) { _ in
            try await clock.sleep(for: .seconds(1000))
            return 1
        }
        let overridden = TaskManagerTestTask<Int>("overridden", timeout: .seconds(5)) { _ in
            try await clock.sleep(for: .seconds(1000))
            return 2
        }
        manager.add(task: own, completion: done.callback(1))
        manager.add(task: overridden, timeout: .seconds(1), completion: done.callback(2))
        await clock.waitForSleepers(count: 4)
        clock.advance(by: .seconds(1))
        await done.waitFor(1)
        #expect(tmDescribe(done.result(2)) == "timedOut")
        #expect(done.result(1) == nil)
        clock.advance(by: .seconds(4))
        await done.waitFor(2)
        #expect(tmDescribe(done.result(1)) == "timedOut")
    }

    @Test func theDeadlineCountsFromTheEndOfTheDelay() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let done = TaskManagerTestCompletions<Int>()
        let gate = TestGate()
        let task = TaskManagerTestTask<Int> { _ in
            await gate.wait()
            return 1
        }
        manager.add(task: task, after: .seconds(10), timeout: .seconds(2), completion: done.callback())
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(10))
        await gate.waitForArrivals(1)
        await clock.waitForSleepers(count: 1)  // the deadline, armed at t+10
        clock.advance(by: .seconds(1))
        #expect(done.count == 0)
        clock.advance(by: .seconds(1))
        await done.waitFor(1)
        #expect(tmDescribe(done.result(0)) == "timedOut")
        gate.open()
    }

    @Test func aResultBeforeTheDeadlineCancelsTheDeadlineTimer() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let value = try await manager.value(of: TaskManagerTestTask<Int> { _ in 8 }, timeout: .seconds(5))
        #expect(value == 8)
        await eventually("deadline timer cancelled") { clock.sleeperCount == 0 }
    }

    // MARK: value(of:)

    @Test func cancellingTheAwaitingSwiftTaskCancelsTheManagedTask() async throws {
        let manager = TaskManager()
        let gate = TestGate()
        let task = TaskManagerTestTask<Int> { _ in
            await gate.wait()
            return 1
        }
        let waiter = Task { try await manager.value(of: task) }
        await gate.waitForArrivals(1)
        waiter.cancel()
        // The caller gets Swift's error for a cancelled caller; the task saw TaskError.cancelled.
        await #expect(throws: CancellationError.self) { try await waiter.boundedValue() }
        #expect(task.cancellations.all == ["cancelled"])
        gate.open()
    }

    @Test func valueOfInAnAlreadyCancelledSwiftTaskNeverRunsTheTask() async throws {
        let manager = TaskManager()
        let task = TaskManagerTestTask<Int> { _ in 1 }
        let waiter = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await manager.value(of: task)
        }
        await #expect(throws: CancellationError.self) { try await waiter.boundedValue() }
        #expect(task.executions.count == 0)
    }

    @Test func valueOfThrowsTheTasksOwnError() async throws {
        let manager = TaskManager()
        await #expect(throws: TaskManagerTestError(code: 3)) {
            try await manager.value(of: TaskManagerTestTask<Int> { _ in throw TaskManagerTestError(code: 3) })
        }
    }

    // MARK: Delivery

    @Test func completionsAreDeliveredOnTheRequestedQueueAndNeverUnderTheLock() async throws {
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "delivery")
        queue.setSpecific(key: key, value: "delivery")
        let manager = TaskManager()
        let done = TaskManagerTestCompletions<Int>()
        let onQueue = TaskManagerTestLog<Bool>()
        for index in 0..<20 {
            let handle = manager.add(
                task: TaskManagerTestTask<Int> { _ in index }, startImmediately: false, completeOn: queue
            ) { result in
                onQueue.append(DispatchQueue.getSpecific(key: key) == "delivery")
                done.record(index, result)
            }
            handle.start()
        }
        // Without a queue, the completion runs outside the lock: it can call back into the manager
        // (the debug lock traps on a re-lock).
        let reentrant = manager.add(task: TaskManagerTestTask<Int> { _ in 99 }, startImmediately: false) { result in
            let other = manager.add(task: TaskManagerTestTask<Int> { _ in 100 }, completion: done.callback(101))
            _ = other.state
            other.cancel()
            done.record(100, result)
        }
        reentrant.start()
        await done.waitFor(22)
        #expect(onQueue.all.count == 20)
        #expect(onQueue.all.allSatisfy { $0 })
        #expect(tmDescribe(done.result(100)) == "success(99)")
    }

    // MARK: Waiting for everything

    @Test func waitTillAllTasksFinishedCoversDelayedHeldAndRequeuedTasks() async throws {
        let clock = ManualClock()
        // The first interceptor holds everything but "release"; the second forces every other
        // task through. A forced task bypasses the first interceptor's batch without releasing
        // it (only the interceptor that answers execute/forceExecute releases its own batch).
        let holder = TaskManagerTestInterceptor { name, _ in name == "release" ? .execute : .hold }
        let forcer = TaskManagerTestInterceptor { name, _ in
            name == "held" || name == "release" ? .execute : .forceExecute
        }
        let firstRun = LockedState(true)
        let reaction = TestGate()
        let reactor = TaskManagerTestReactor(ReactorConfiguration(requeuesTask: true)) { _, name in
            name == "requeued" && firstRun.withLock { first in defer { first = false }; return first }
        } work: { _ in
            await reaction.wait()
        }
        let manager = TaskManager(interceptors: [holder, forcer], reactors: [reactor], clock: clock)
        let done = TaskManagerTestCompletions<Int>()
        let delayed = TaskManagerTestTask<Int>("delayed") { _ in 1 }
        let held = TaskManagerTestTask<Int>("held") { _ in 2 }
        let requeued = TaskManagerTestTask<Int>("requeued") { _ in 3 }
        let neverStarted = TaskManagerTestTask<Int>("never") { _ in 4 }
        manager.add(task: delayed, after: .seconds(5), completion: done.callback(1))
        manager.add(task: requeued, completion: done.callback(3))
        await reaction.waitForArrivals(1)
        manager.add(task: held, completion: done.callback(2))
        manager.add(task: neverStarted, startImmediately: false, completion: done.callback(4))
        let finished = LockedState(false)
        let waiter = Task {
            await manager.waitTillAllTasksFinished()
            finished.withLock { $0 = true }
        }
        await eventually("waiter stored") { manager.inspect { $0.waiterCount == 1 } }
        #expect(manager.inspect { $0.unfinishedCount } == 3)
        reaction.open()
        await done.waitFor(1)
        #expect(tmDescribe(done.result(3)) == "success(3)")
        #expect(requeued.executions.count == 2)
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(5))
        await done.waitFor(2)
        #expect(tmDescribe(done.result(1)) == "success(1)")
        #expect(finished.withLock { $0 } == false)
        #expect(manager.inspect { $0.unfinishedCount } == 1)
        // Releasing the batch finishes the last one.
        manager.add(task: TaskManagerTestTask<Int>("release") { _ in 5 }, completion: done.callback(5))
        try await waiter.boundedValue()
        #expect(done.count >= 3)
        #expect(tmDescribe(done.result(2)) == "success(2)")
        #expect(done.result(4) == nil)
        #expect(neverStarted.executions.count == 0)
    }

    @Test func waitTillAllTasksFinishedReturnsWhenItsSwiftTaskIsCancelled() async throws {
        let manager = TaskManager()
        let gate = TestGate()
        manager.add(task: TaskManagerTestTask<Int> { _ in await gate.wait(); return 1 })
        let waiter = Task { await manager.waitTillAllTasksFinished() }
        await eventually("waiter stored") { manager.inspect { $0.waiterCount == 1 } }
        waiter.cancel()
        try await waiter.boundedValue()
        #expect(manager.inspect { $0.waiterCount } == 0)
        gate.open()
        await manager.waitTillAllTasksFinished()
    }

    // MARK: No thread is blocked

    @Test func aThousandNestedAwaitsComplete() async throws {
        let manager = TaskManager()
        @Sendable func nested(_ depth: Int) -> TaskManagerTestTask<Int> {
            TaskManagerTestTask<Int> { _ in
                depth == 0 ? 0 : try await manager.value(of: nested(depth - 1)) + 1
            }
        }
        #expect(try await manager.value(of: nested(1000)) == 1000)

        @Sendable func nestedCallbacks(_ depth: Int) async -> Int {
            if depth == 0 { return 0 }
            return await awaitCallback { (done: @escaping @Sendable (Int) -> Void) in
                Task { done(await nestedCallbacks(depth - 1) + 1) }
            }
        }
        #expect(await nestedCallbacks(1000) == 1000)
    }

    @Test func awaitCallbackBridgesTheThreeCallbackShapes() async throws {
        let value = await awaitCallback { (done: @escaping @Sendable (Int) -> Void) in
            DispatchQueue.global().async { done(5); done(6) }
        }
        #expect(value == 5)
        let calls = TaskManagerTestLog<Int>()
        await awaitCallback { (done: @escaping @Sendable () -> Void) in
            DispatchQueue.global().async { calls.append(1); done(); done() }
        }
        #expect(calls.count == 1)
        let text = try await awaitCallback { (done: @escaping @Sendable (Result<String, any Error>) -> Void) in
            DispatchQueue.global().async { done(.success("ok")) }
        }
        #expect(text == "ok")
        await #expect(throws: TaskManagerTestError(code: 1)) {
            _ = try await awaitCallback { (done: @escaping @Sendable (Result<String, any Error>) -> Void) in
                done(.failure(TaskManagerTestError(code: 1)))
            }
        }
    }

    // MARK: Concurrency limit

    @Test func maximumConcurrencyIsHonoured() async throws {
        let manager = TaskManager(maximumConcurrentTasks: 3)
        let gate = TestGate()
        let current = LockedState((now: 0, peak: 0))
        let done = TaskManagerTestCompletions<Int>()
        for index in 0..<30 {
            manager.add(task: TaskManagerTestTask<Int> { _ in
                current.withLock { $0.now += 1; $0.peak = max($0.peak, $0.now) }
                await gate.wait()
                for _ in 0..<10 { await Task.yield() }
                current.withLock { $0.now -= 1 }
                return index
            }, completion: done.callback(index))
        }
        await gate.waitForArrivals(3)
        #expect(manager.inspect { $0.runningCount } == 3)
        #expect(gate.arrivals == 3)
        gate.open()
        await done.waitFor(30)
        #expect(current.withLock { $0.peak } == 3)
    }

    // MARK: Preconditions

    @Test func invalidConfigurationIsRejected() async {
        await #expect(processExitsWith: .failure) { _ = TaskManager(maximumConcurrentTasks: 0) }
        await #expect(processExitsWith: .failure) {
            TaskManager().add(task: TaskManagerTestTask<Int> { _ in 1 }, after: .seconds(-1))
        }
        await #expect(processExitsWith: .failure) {
            TaskManager().add(task: TaskManagerTestTask<Int> { _ in 1 }, timeout: .zero)
        }
        await #expect(processExitsWith: .failure) { _ = ReactorConfiguration(timeout: .seconds(-2)) }
    }
}
