import Dispatch
import Testing
@testable import TaskKit
import TaskKitTestSupport
import TaskKitTesting

/// `AnyTask`, the closure conveniences of `TaskManager`, timed waits, and a reactor that only
/// decides.
@Suite(.scaledTimeLimit(minutes: 1)) struct TaskManagerClosureTaskTests {
    // MARK: A reactor that only decides

    /// Implements `shouldExecute` only.
    struct RequeueOnce: DecisionOnlyReactor {
        let seen = TaskManagerTestLog<Int>()
        var configuration: ReactorConfiguration { ReactorConfiguration(requeuesTask: true) }

        func shouldExecute<T: ManagedTask>(
            after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
        ) -> Bool {
            seen.append(1)
            return seen.count == 1
        }
    }

    @Test func aReactorThatOnlyDecidesRequeuesWithoutSideWork() async throws {
        let reactor = RequeueOnce()
        let manager = TaskManager(reactors: [reactor])
        let task = TaskManagerTestTask<Int> { task in task.executions.count }
        #expect(try await manager.value(of: task) == 2)
        #expect(task.executions.count == 2)
        #expect(reactor.seen.count == 2)
    }

    @Test func theDecisionOnlyReactionSucceedsAtOnce() async throws {
        let reactor = RequeueOnce()
        try await reactor.execute()
    }

    /// A reactor in the callback style, reporting `outcome` from another queue.
    struct CallbackRefresh: CallbackReactor {
        let runs = TaskManagerTestLog<Int>()
        let outcome: TaskManagerTestError?
        func shouldExecute<T: ManagedTask>(
            after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
        ) -> Bool { true }
        func execute(done: @escaping @Sendable ((any Error)?) -> Void) {
            runs.append(1)
            DispatchQueue.global().async { done(outcome) }
        }
    }

    @Test func aCallbackReactorsReactionIsItsDoneCallback() async throws {
        let succeeding = CallbackRefresh(outcome: nil)
        try await succeeding.execute()
        #expect(succeeding.runs.count == 1)
        let failing = CallbackRefresh(outcome: TaskManagerTestError(code: 4))
        await #expect(throws: TaskManagerTestError(code: 4)) { try await failing.execute() }
        #expect(failing.runs.count == 1)
    }

    // MARK: AnyTask

    @Test func anyTaskRunsAnAsyncClosure() async throws {
        let manager = TaskManager()
        #expect(try await manager.value(of: AnyTask { 3 }) == 3)
        await #expect(throws: TaskManagerTestError(code: 1)) {
            try await manager.value(of: AnyTask<Void> { throw TaskManagerTestError(code: 1) })
        }
    }

    @Test func anyTaskRunsACallbackClosureAndTheFirstCallWins() async throws {
        let manager = TaskManager()
        let task = AnyTask<Int> { completion in
            DispatchQueue.global().async {
                completion(.success(7))
                completion(.success(8))
            }
        }
        #expect(try await manager.value(of: task) == 7)
        let failing = AnyTask<Int> { completion in completion(.failure(TaskManagerTestError(code: 2))) }
        await #expect(throws: TaskManagerTestError(code: 2)) { try await manager.value(of: failing) }
    }

    @Test func anyTaskFromTaskRunsTheWrappedTaskAndForwardsItsDeadlineAndCancellation() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let gate = TestGate()
        let wrapped = TaskManagerTestTask<Int>("wrapped", timeout: .seconds(2)) { _ in
            await gate.wait()
            try Task.checkCancellation()
            return 1
        }
        let erased = AnyTask(fromTask: wrapped)
        #expect(erased.timeout == .seconds(2))
        let done = TaskManagerTestCompletions<Int>()
        manager.add(task: erased, completion: done.callback())
        await gate.waitForArrivals(1)
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(2))
        await done.waitFor(1)
        #expect(tmDescribe(done.result(0)) == "timedOut")
        #expect(wrapped.cancellations.all == ["timedOut"])
        #expect(wrapped.executions.count == 1)
        gate.open()
    }

    @Test func anyTaskWithATimeoutTimesOutOnTheManagersClock() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let release = TestGate()
        let cancelled = TaskManagerTestLog<Int>()
        let task = AnyTask<Int>(timeout: .seconds(1)) {
            await withTaskCancellationHandler {
                await release.wait()
            } onCancel: {
                cancelled.append(1)
                release.open()
            }
            return 1
        }
        let outcome = Task { try await manager.value(of: task) }
        await release.waitForArrivals(1)
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(1))
        #expect(tmDescribe(await outcome.result) == "timedOut")
        await eventually("the work was cancelled") { cancelled.count == 1 }
    }

    @Test func invalidAnyTaskTimeoutIsRejectedNamingTheParameter() async {
        await #expect(processExitsWith: .failure) {
            _ = AnyTask<Int>(timeout: .zero) { 1 }
        }
    }

    // MARK: TaskManager closure conveniences

    @Test func addAndValueTakeClosures() async throws {
        let manager = TaskManager()
        let done = TaskManagerTestCompletions<String>()
        let handle = manager.add { "added" } completion: { done.record(0, $0) }
        await done.waitFor(1)
        #expect(tmDescribe(done.result(0)) == "success(added)")
        #expect(handle.state == .finished)
        #expect(try await manager.value { 40 + 2 } == 42)
    }

    @Test func valueWithATimeoutFailsWithTimedOutAndCancelsTheWork() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let cancelled = TestGate()
        let started = TestGate()
        let outcome = Task { () async throws -> Int in
          try await manager.value(timeout: .milliseconds(500)) {
            started.open()
            await withTaskCancellationHandler {
                await cancelled.wait()
            } onCancel: {
                cancelled.open()
            }
            return 1
          }
        }
        await started.wait()
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .milliseconds(500))
        #expect(tmDescribe(await outcome.result) == "timedOut")
        await cancelled.wait()
    }

    // MARK: awaitCallback with a deadline

    @Test func timedAwaitCallbackReturnsTheValueForEveryShape() async throws {
        let value = try await awaitCallback(timeout: .seconds(30)) { (done: @escaping @Sendable (Int) -> Void) in
            DispatchQueue.global().async { done(5) }
        }
        #expect(value == 5)
        try await awaitCallback(timeout: .seconds(30)) { (done: @escaping @Sendable () -> Void) in
            DispatchQueue.global().async { done() }
        }
        let result = try await awaitCallback(timeout: .seconds(30)) {
            (done: @escaping @Sendable (Result<String, any Error>) -> Void) in
            done(.success("ok"))
            done(.success("ignored"))
        }
        #expect(result == "ok")
        await #expect(throws: TaskManagerTestError(code: 3)) {
            try await awaitCallback(timeout: .seconds(30)) {
                (done: @escaping @Sendable (Result<String, any Error>) -> Void) in
                done(.failure(TaskManagerTestError(code: 3)))
            }
        }
    }

    @Test func timedAwaitCallbackFailsWithTimedOutForEveryShapeAndIgnoresALateCall() async throws {
        let clock = ManualClock()
        let late = LockedState<[@Sendable () -> Void]>([])
        let first = Task { () async throws -> Int in try await awaitCallback(timeout: .seconds(1), clock: clock) {
            (done: @escaping @Sendable (Int) -> Void) in
            late.withLock { $0.append { done(1) } }
        } }
        let second = Task { () async throws -> Void in try await awaitCallback(timeout: .seconds(1), clock: clock) {
            (done: @escaping @Sendable () -> Void) in
            late.withLock { $0.append { done() } }
        } }
        let third = Task { () async throws -> Int in try await awaitCallback(timeout: .seconds(1), clock: clock) {
            (done: @escaping @Sendable (Result<Int, any Error>) -> Void) in
            late.withLock { $0.append { done(.success(3)) } }
        } }
        await clock.waitForSleepers(count: 3)
        clock.advance(by: .seconds(1))
        #expect(tmDescribe(await first.result) == "timedOut")
        #expect(tmDescribe(await second.result) == "timedOut")
        #expect(tmDescribe(await third.result) == "timedOut")
        for call in late.withLock({ $0 }) { call() }
    }

    @Test func timedAwaitCallbackCancelsItsTimerWhenTheCallbackComesFirst() async throws {
        let clock = ManualClock()
        let value = try await awaitCallback(timeout: .seconds(1), clock: clock) {
            (done: @escaping @Sendable (Int) -> Void) in
            done(9)
        }
        #expect(value == 9)
        await eventually("timer gone") { clock.sleeperCount == 0 }
    }

    @Test func invalidAwaitCallbackTimeoutIsRejectedNamingTheParameter() async {
        await #expect(processExitsWith: .failure) {
            _ = try? await awaitCallback(timeout: .zero) { (done: @escaping @Sendable (Int) -> Void) in done(1) }
        }
    }
}
