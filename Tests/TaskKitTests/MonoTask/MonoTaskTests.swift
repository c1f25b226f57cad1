import Dispatch
import Foundation
import Synchronization
import Testing
import TaskKitTestSupport
import TaskKitTesting
@testable import TaskKit

/// The real `MonoTask`, driven by a `ManualClock` (no real sleeps for library-owned time).
@Suite struct MonoTaskTests {
    // MARK: Caching

    @Test func aCacheHitDoesNotExecuteAgainUntilTheTTLEnds() async throws {
        let clock = ManualClock()
        let runs = MonoCounter()
        let task = MonoTask<Int>(resultExpireDuration: .seconds(10), clock: clock) {
            .success(runs.increment())
        }
        #expect(try await task.executeThrows() == 1)
        clock.advance(by: .seconds(9))
        #expect(try await task.executeThrows() == 1)
        #expect(task.currentResult == 1)
        clock.advance(by: .seconds(1))
        #expect(task.currentResult == nil)
        #expect(try await task.executeThrows() == 2)
        #expect(runs.value == 2)
        #expect(task.counters.hits == 1)
    }

    @Test func aCacheHitCompletesWithoutSuspendingTheCaller() async throws {
        let task = MonoTask<Int>(resultExpireDuration: nil, clock: ManualClock()) { .success(42) }
        _ = await task.asyncExecute()  // fill the cache
        let probe = MonoProbe()
        let (jobs, values) = await probe.jobsDuring(hits: 100, on: task)
        #expect(values == Array(repeating: 42, count: 100))
        #expect(jobs == 0)
        // The probe does see a real suspension.
        #expect(await probe.jobsDuringYield() >= 1)
    }

    @Test func zeroTTLCachesNothingButMergesConcurrentCallers() async throws {
        let gate = TestGate()
        let runs = MonoCounter()
        let task = MonoTask<Int>(resultExpireDuration: .zero, clock: ManualClock()) {
            let run = runs.increment()
            await gate.wait()
            return .success(run)
        }
        async let a = task.asyncExecute()
        async let b = task.asyncExecute()
        await eventually { task.counters.merges == 1 }
        gate.open()
        #expect(try await a.get() == 1)
        #expect(try await b.get() == 1)
        #expect(task.currentResult == nil)
        #expect(try await task.executeThrows() == 2)
    }

    @Test func manyConcurrentCallersShareOneExecution() async throws {
        let gate = TestGate()
        let runs = MonoCounter()
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), clock: ManualClock()) {
            let run = runs.increment()
            await gate.wait()
            return .success(run * 10)
        }
        let results = await withTaskGroup(of: Int?.self) { group in
            for _ in 0..<200 {
                group.addTask { try? await task.executeThrows() }
            }
            await eventually { task.counters.merges == 199 }
            gate.open()
            return await group.reduce(into: [Int?]()) { $0.append($1) }
        }
        #expect(results.count == 200)
        #expect(results.allSatisfy { $0 == 10 })
        #expect(runs.value == 1)
    }

    // MARK: Retry

    @Test func retriesWithExponentialBackoffOnTheInjectedClock() async throws {
        let clock = ManualClock()
        let attempts = MonoCounter()
        let task = MonoTask<String>(
            retry: .count(count: 3, intervalProxy: .exponential(initial: .seconds(1), scaleRate: 2)),
            resultExpireDuration: .seconds(60),
            clock: clock
        ) {
            let attempt = attempts.increment()
            return attempt < 3 ? .failure(MonoTestError(attempt: attempt)) : .success("ok on \(attempt)")
        }
        async let result = task.asyncExecute()
        await clock.waitForSleepers(count: 1)
        #expect(attempts.value == 1)
        clock.advance(by: .milliseconds(999))
        #expect(clock.sleeperCount == 1)  // not yet
        clock.advance(by: .milliseconds(1))
        await attempts.wait(untilAtLeast: 2)
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(2))  // the second delay doubled
        #expect(try await result.get() == "ok on 3")
        #expect(clock.totalSleeps == 2)
        #expect(task.counters.retries == 2)
        #expect(task.currentResult == "ok on 3")
    }

    @Test func theFinalFailureGoesToEveryWaiterAndIsNotCached() async throws {
        let attempts = MonoCounter()
        let gate = TestGate()
        let task = MonoTask<Int>(retry: 2, resultExpireDuration: .seconds(60), clock: ManualClock()) {
            await gate.wait()
            return .failure(MonoTestError(attempt: attempts.increment()))
        }
        async let a = task.asyncExecute()
        async let b = task.asyncExecute()
        await eventually { task.counters.merges == 1 }
        gate.open()
        let (ra, rb) = await (a, b)
        // Both see the third attempt's error, never an intermediate one.
        #expect(throws: MonoTestError(attempt: 3)) { try ra.get() }
        #expect(throws: MonoTestError(attempt: 3)) { try rb.get() }
        #expect(task.currentResult == nil)
        #expect(!task.isExecuting)
    }

    // MARK: forceUpdate

    @Test func forceUpdateChainsAFreshRunAfterTheCurrentOneNeverBesideIt() async throws {
        let overlap = MonoOverlap()
        let entered = MonoCounter()
        let gates = [TestGate(), TestGate()]
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), clock: ManualClock()) {
            overlap.enter()
            defer { overlap.leave() }
            let run = entered.increment()
            await gates[run - 1].wait()
            return .success(run)
        }
        async let first = task.asyncExecute()
        await entered.wait(untilAtLeast: 1)
        async let forced = task.asyncExecute(forceUpdate: true)
        await eventually { task.counters.merges == 1 }
        #expect(entered.value == 1)  // the forced call did not start a second run beside the first
        gates[0].open()
        #expect(try await first.get() == 1)
        await entered.wait(untilAtLeast: 2)
        gates[1].open()
        #expect(try await forced.get() == 2)
        #expect(overlap.maximum == 1)
        #expect(task.currentResult == 2)
    }

    @Test func aFailedForcedRunKeepsThePreviousValue() async throws {
        let attempts = MonoCounter()
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), clock: ManualClock()) {
            let attempt = attempts.increment()
            return attempt == 1 ? .success(1) : .failure(MonoTestError(attempt: attempt))
        }
        #expect(try await task.executeThrows() == 1)
        await #expect(throws: MonoTestError(attempt: 2)) { try await task.executeThrows(forceUpdate: true) }
        #expect(task.currentResult == 1)
        #expect(try await task.executeThrows() == 1)
    }

    // MARK: clearResult

    @Test func clearCancelFailsWaitersAtOnceAndCancelsTheAsyncTask() async throws {
        let clock = ManualClock()
        let sawCancellation = MonoCounter()
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), clock: clock) {
            do {
                try await clock.sleep(for: .seconds(100))  // a long operation that honours cancellation
                return .success(1)
            } catch {
                sawCancellation.increment()
                return .failure(error)
            }
        }
        async let a = task.asyncExecute()
        async let b = task.asyncExecute()
        await eventually { task.counters.merges == 1 }
        await clock.waitForSleepers(count: 1)
        task.clearResult(ongoingExecutionStrategy: .cancel)
        let (ra, rb) = await (a, b)
        #expect(throws: MonoTask<Int>.Errors.executionCancelledDueToClearResult) { try ra.get() }
        #expect(throws: MonoTask<Int>.Errors.executionCancelledDueToClearResult) { try rb.get() }
        await sawCancellation.wait(untilAtLeast: 1)
        #expect(task.currentResult == nil)
        #expect(task.counters.cancellations == 1)
    }

    @Test func clearCancelStopsAPendingRetryForGood() async throws {
        let clock = ManualClock()
        let attempts = MonoCounter()
        let task = MonoTask<Int>(
            retry: .infinity(intervalProxy: .fixed(.seconds(1))), resultExpireDuration: .seconds(60), clock: clock
        ) {
            let attempt = attempts.increment()
            return attempt == 1 ? .failure(MonoTestError(attempt: attempt)) : .success(attempt)
        }
        async let waiting = task.asyncExecute()
        await clock.waitForSleepers(count: 1)
        task.clearResult(ongoingExecutionStrategy: .cancel)
        let waited = await waiting
        #expect(throws: MonoTask<Int>.Errors.executionCancelledDueToClearResult) { try waited.get() }
        await eventually { clock.sleeperCount == 0 }  // the backoff sleep was cancelled
        clock.advance(by: .seconds(10))
        #expect(attempts.value == 1)
        #expect(!task.isExecuting)
        #expect(task.currentResult == nil)
        // A later call runs afresh; the old retry never came back.
        #expect(try await task.executeThrows() == 2)
        #expect(attempts.value == 2)
    }

    @Test func afterClearCancelTheNextRunWaitsForTheCancelledBlockToReturn() async throws {
        let overlap = MonoOverlap()
        let entered = MonoCounter()
        let gate = TestGate()
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), clock: ManualClock()) {
            overlap.enter()
            defer { overlap.leave() }
            let run = entered.increment()
            if run == 1 { await gate.wait() }  // ignores cancellation
            return .success(run)
        }
        async let first = task.asyncExecute()
        await entered.wait(untilAtLeast: 1)
        task.clearResult(ongoingExecutionStrategy: .cancel)
        let firstResult = await first
        #expect(throws: MonoTask<Int>.Errors.executionCancelledDueToClearResult) { try firstResult.get() }
        async let second = task.asyncExecute()
        await eventually { task.isExecuting }
        #expect(entered.value == 1)
        gate.open()
        #expect(try await second.get() == 2)
        #expect(overlap.maximum == 1)
    }

    @Test func clearRestartDeliversTheFreshResultToOldAndNewWaiters() async throws {
        let entered = MonoCounter()
        let gates = [TestGate(), TestGate()]
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), clock: ManualClock()) {
            let run = entered.increment()
            await gates[run - 1].wait()
            return .success(run)
        }
        async let old = task.asyncExecute()
        await entered.wait(untilAtLeast: 1)
        task.clearResult(ongoingExecutionStrategy: .restart)
        #expect(entered.value == 1)  // not started immediately
        async let new = task.asyncExecute()
        await eventually { task.counters.merges == 1 }
        gates[0].open()
        await entered.wait(untilAtLeast: 2)
        gates[1].open()
        #expect(try await old.get() == 2)
        #expect(try await new.get() == 2)
        #expect(task.currentResult == 2)
    }

    @Test func clearAllowCompletionLetsTheRunFinishAndCache() async throws {
        let gate = TestGate()
        let entered = MonoCounter()
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), clock: ManualClock()) {
            let run = entered.increment()
            await gate.wait()
            return .success(run)
        }
        async let value = task.asyncExecute()
        await entered.wait(untilAtLeast: 1)
        task.clearResult(ongoingExecutionStrategy: .allowCompletion)
        gate.open()
        #expect(try await value.get() == 1)
        #expect(task.currentResult == 1)
    }

    @Test func restartWhenIdleStartsARunThatLaterCallersJoin() async throws {
        let gate = TestGate()
        let entered = MonoCounter()
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), clock: ManualClock()) {
            let run = entered.increment()
            if run == 2 { await gate.wait() }
            return .success(run)
        }
        #expect(try await task.executeThrows() == 1)
        task.clearResult(restartWhenIdle: true)
        #expect(task.isExecuting)
        #expect(task.currentResult == nil)
        async let late = task.asyncExecute()
        await eventually { task.counters.merges == 1 }
        gate.open()
        #expect(try await late.get() == 2)
        #expect(entered.value == 2)
    }

    // MARK: Caller cancellation

    @Test func aCancelledCallerResumesAtOnceWhileTheRunGoesOn() async throws {
        let gate = TestGate()
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), clock: ManualClock()) {
            await gate.wait()
            return .success(5)
        }
        let leaver = Task { await task.asyncExecute() }
        async let stayer = task.asyncExecute()
        await eventually { task.counters.merges == 1 }
        leaver.cancel()
        let left = try await leaver.boundedValue()
        #expect(throws: CancellationError.self) { try left.get() }
        #expect(task.isExecuting)
        gate.open()
        #expect(try await stayer.get() == 5)
        #expect(task.currentResult == 5)
        #expect(task.counters.callerCancellations == 1)
    }

    @Test func aCallerCancelledBeforeCallingDoesNotStartARun() async throws {
        let runs = MonoCounter()
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), clock: ManualClock()) { .success(runs.increment()) }
        let caller = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await task.asyncExecute()
        }
        let called = try await caller.boundedValue()
        #expect(throws: CancellationError.self) { try called.get() }
        #expect(!task.isExecuting)
        #expect(runs.value == 0)
    }

    // MARK: Callbacks

    @Test func callbacksArriveOnTheCallbackQueueInRegistrationOrder() async throws {
        let key = DispatchSpecificKey<String>()
        let callbackQueue = DispatchQueue(label: "mono.callbacks")
        callbackQueue.setSpecific(key: key, value: "callbacks")
        let gate = TestGate()
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), callbackQueue: callbackQueue, clock: ManualClock()) {
            await gate.wait()
            return .success(1)
        }
        let order = LockedState<[Int]>([])
        let delivered = MonoCounter()
        for index in 0..<20 {
            task.execute { result in
                #expect(DispatchQueue.getSpecific(key: key) == "callbacks")
                #expect((try? result.get()) == 1)
                order.withLock { $0.append(index) }
                delivered.increment()
            }
        }
        gate.open()
        await delivered.wait(untilAtLeast: 20)
        #expect(order.withLock { $0 } == Array(0..<20))
        // A cache hit is delivered on the callback queue too.
        task.execute { _ in
            #expect(DispatchQueue.getSpecific(key: key) == "callbacks")
            delivered.increment()
        }
        await delivered.wait(untilAtLeast: 21)
    }

    @Test func aCallbackBlockRunsOnTheTaskQueueAndOnlyItsFirstCallCounts() async throws {
        let key = DispatchSpecificKey<String>()
        let taskQueue = DispatchQueue(label: "mono.task")
        taskQueue.setSpecific(key: key, value: "task")
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), taskQueue: taskQueue, clock: ManualClock()) { callback in
            #expect(DispatchQueue.getSpecific(key: key) == "task")
            callback(.success(1))
            callback(.success(2))
            callback(.failure(MonoTestError()))
        }
        #expect(try await task.executeThrows() == 1)
        #expect(task.currentResult == 1)
    }

    @Test func aMonoTaskReleasedWhileExecutingStillDelivers() async throws {
        let gate = TestGate()
        let delivered = MonoCounter()
        weak var weakTask: MonoTask<Int>?
        do {
            let task = MonoTask<Int>(resultExpireDuration: .seconds(60), clock: ManualClock()) { callback in
                Task {
                    await gate.wait()
                    callback(.success(3))
                }
            }
            weakTask = task
            task.execute { result in
                #expect((try? result.get()) == 3)
                delivered.increment()
            }
        }
        #expect(weakTask != nil)  // the run keeps it alive
        gate.open()
        await delivered.wait(untilAtLeast: 1)
        await eventually { weakTask == nil }  // and lets it go afterwards
    }

    // MARK: Stale-while-revalidate and counters

    @Test func staleWhileRevalidateServesTheOldValueAndRefreshesInTheBackground() async throws {
        let clock = ManualClock()
        let runs = MonoCounter()
        let gate = TestGate()
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), refreshAhead: .age(.seconds(10)), clock: clock) {
            let run = runs.increment()
            if run == 2 { await gate.wait() }
            return .success(run)
        }
        #expect(try await task.executeThrows() == 1)
        clock.advance(by: .seconds(15))
        #expect(try await task.executeThrows() == 1)  // at once, from the cache
        #expect(task.isExecuting)  // the refresh runs
        #expect(try await task.executeThrows() == 1)  // no second refresh
        gate.open()
        await eventually { !task.isExecuting }
        #expect(task.currentResult == 2)
        let counters = task.counters
        #expect(counters.loads == 2)
        #expect(counters.hits == 2)
        #expect(counters.refreshesAhead == 1)
    }

    @Test func refreshAheadAtAFractionFollowsEachValuesOwnLifetime() async throws {
        let clock = ManualClock()
        let runs = MonoCounter()
        // The first value lives 100 s, the second its own 10 s (`expiry`): 80 % of each.
        let task = MonoTask<Int>(
            resultExpireDuration: .seconds(100), refreshAhead: .fraction(0.8), clock: clock,
            expiry: { value in value == 2 ? .seconds(10) : nil }
        ) {
            .success(runs.increment())
        }
        #expect(try await task.executeThrows() == 1)
        clock.advance(by: .seconds(79))
        #expect(try await task.executeThrows() == 1)
        #expect(task.counters.refreshesAhead == 0)
        clock.advance(by: .seconds(1))
        #expect(try await task.executeThrows() == 1)  // due: served, and the refresh starts
        await eventually { task.currentResult == 2 }
        clock.advance(by: .seconds(7))
        #expect(try await task.executeThrows() == 2)
        #expect(task.counters.refreshesAhead == 1)
        clock.advance(by: .seconds(1))
        #expect(try await task.executeThrows() == 2)
        await eventually { task.currentResult == 3 }
        #expect(task.counters.refreshesAhead == 2)
        #expect(task.counters.loads == 3)
    }

    // MARK: Configuration

    @available(*, deprecated, message: "exercises the seconds-based compatibility initialisers")
    @Test func invalidConfigurationIsRejectedWithTheParameterName() async throws {
        let negative = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = MonoTask<Int>(resultExpireDuration: -1) { .success(1) }
        }
        #expect(String(decoding: negative.standardErrorContent, as: UTF8.self).contains("resultExpireDuration"))
        #expect(String(decoding: negative.standardErrorContent, as: UTF8.self).contains("-1"))
        let nan = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = MonoTask<Int>(resultExpireDuration: .nan) { callback in callback(.success(1)) }
        }
        #expect(String(decoding: nan.standardErrorContent, as: UTF8.self).contains("resultExpireDuration"))
    }

    @Test func invalidDurationConfigurationIsRejectedWithTheParameterName() async throws {
        let negative = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = MonoTask<Int>(resultExpireDuration: .seconds(-1)) { .success(1) }
        }
        #expect(String(decoding: negative.standardErrorContent, as: UTF8.self).contains("resultExpireDuration"))
        #expect(String(decoding: negative.standardErrorContent, as: UTF8.self).contains("-1"))
        let refresh = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = MonoTask<Int>(resultExpireDuration: .seconds(10), refreshAhead: .age(.seconds(10))) { callback in
                callback(.success(1))
            }
        }
        #expect(String(decoding: refresh.standardErrorContent, as: UTF8.self).contains("refreshAhead's age"))
        let negativeRefresh = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = MonoTask<Int>(resultExpireDuration: nil, refreshAhead: .age(.seconds(-1))) { .success(1) }
        }
        #expect(String(decoding: negativeRefresh.standardErrorContent, as: UTF8.self).contains("RefreshAhead: age"))
        let fraction = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = MonoTask<Int>(resultExpireDuration: .seconds(10), refreshAhead: .fraction(1)) { .success(1) }
        }
        #expect(String(decoding: fraction.standardErrorContent, as: UTF8.self).contains("RefreshAhead: fraction"))
    }

    @Test func durationTimeToLiveExpiresOnTheClockAndNilKeepsTheValue() async throws {
        let clock = ManualClock()
        let runs = LockedState(0)
        let expiring = MonoTask<Int>(resultExpireDuration: .seconds(10), clock: clock) {
            .success(runs.withLock { $0 += 1; return $0 })
        }
        #expect(try await expiring.executeThrows() == 1)
        clock.advance(by: .seconds(9))
        #expect(try await expiring.executeThrows() == 1)
        clock.advance(by: .seconds(1))
        #expect(try await expiring.executeThrows() == 2)
        let forever = MonoTask<Int>(resultExpireDuration: nil, clock: clock) { .success(7) }
        #expect(try await forever.executeThrows() == 7)
        clock.advance(by: .seconds(1_000_000))
        #expect(forever.currentResult == 7)
        forever.clearResult(restartWhenIdle: true)
        await eventually { forever.currentResult == 7 && !forever.isExecuting }
        #expect(forever.counters.loads == 2)
    }
}
