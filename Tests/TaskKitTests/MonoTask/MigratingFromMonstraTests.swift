import Dispatch
import Testing
import TaskKit
import TaskKitTestSupport

/// Monstra's `MonoTask` and `RetryCount` examples in their TaskKit form, one test per row of
/// "Migrating from Monstra" (TaskKit.docc/MigratingFromMonstra.md).
@Suite(.scaledTimeLimit(minutes: 1)) struct MigratingFromMonstraTests {
    final class Calls: Sendable {
        private let count = LockedState(0)
        func next() -> Int { count.withLock { $0 += 1; return $0 } }
        var value: Int { count.withLock { $0 } }
    }

    struct Flaky: Error {}

    @available(*, deprecated, message: "exercises Monstra's spellings, kept as deprecated compatibility overloads")
    @Test func basicUsageWithCaching() async throws {
        let calls = Calls()
        let task = MonoTask<String>(resultExpireDuration: 60.0) { callback in
            let n = calls.next()
            DispatchQueue.global().async { callback(.success("page \(n)")) }
        }
        let result1 = await task.asyncExecute()
        let result2 = await task.asyncExecute()
        let result3 = await task.asyncExecute()
        #expect(try result1.get() == "page 1" && result2.get() == "page 1" && result3.get() == "page 1")
        #expect(calls.value == 1)
    }

    @available(*, deprecated, message: "exercises Monstra's spellings, kept as deprecated compatibility overloads")
    @Test func withRetryLogic() async throws {
        let calls = Calls()
        let retryTask = MonoTask<Int>(
            retry: .count(count: 3, intervalProxy: .exponentialBackoff(initialTimeInterval: 0, scaleRate: 2.0)),
            resultExpireDuration: 300.0
        ) { callback in
            let n = calls.next()
            callback(n < 3 ? .failure(Flaky()) : .success(n))
        }
        #expect(try await retryTask.executeThrows() == 3)
    }

    @available(*, deprecated, message: "exercises Monstra's spellings, kept as deprecated compatibility overloads")
    @Test func asyncInitialiserReturningAResult() async throws {
        let apiTask = MonoTask<Int>(
            retry: .count(count: 2, intervalProxy: .fixed(timeInterval: 0)),
            resultExpireDuration: 60.0
        ) {
            .success(42)
        }
        #expect(try await apiTask.executeThrows() == 42)
        #expect(apiTask.currentResult == 42)
    }

    @available(*, deprecated, message: "exercises Monstra's spellings, kept as deprecated compatibility overloads")
    @Test func executeWithACallbackAndJustExecute() async throws {
        let task = MonoTask<Int>(resultExpireDuration: 60) { .success(5) }
        task.justExecute()
        let received = try await awaitCallback(timeout: .seconds(30)) { (resume: @escaping @Sendable (Int) -> Void) in
            task.execute { result in resume((try? result.get()) ?? -1) }
        }
        #expect(received == 5)
        #expect(!task.isExecuting)
    }

    @available(*, deprecated, message: "exercises Monstra's spellings, kept as deprecated compatibility overloads")
    @Test func clearResultStrategies() async throws {
        let gate = TestGate()
        let task = MonoTask<Int>(resultExpireDuration: 60) {
            await gate.wait()
            return .success(1)
        }
        let waiter = Task { await task.asyncExecute() }
        await eventually { task.isExecuting }
        task.clearResult(ongoingExecutionStrategy: .cancel)
        let outcome = try await waiter.boundedValue()
        #expect(throws: MonoTask<Int>.Errors.executionCancelledDueToClearResult) { try outcome.get() }
        gate.open()
        task.clearResult(ongoingExecutionStrategy: .allowCompletion)
        task.clearResult(ongoingExecutionStrategy: .restart, shouldRestartWhenIDLE: true)
        await eventually { task.currentResult == 1 }
    }

    @available(*, deprecated, message: "exercises Monstra's spellings, kept as deprecated compatibility overloads")
    @Test func retryCountAndItsNestedIntervalProxy() {
        let never: RetryCount = 0
        let three: RetryCount = 3
        #expect(never == .never && three == .count(count: 3))
        #expect(RetryCount.infinity().maximumRetries == nil)
        let before = RetryCount.IntervalProxy.exponentialBackoffBeforeFixed(
            initialTimeInterval: 1, maxExponentialBackoffCount: 2, scaleRate: 2
        )
        let after = RetryCount.IntervalProxy.exponentialBackoffAfterFixed(maxFixedCount: 1)
        #expect((1...4).map { before.baseDelay(forRetry: $0).inSeconds } == [1, 2, 4, 1])
        #expect((1...4).map { after.baseDelay(forRetry: $0).inSeconds } == [1, 1, 2, 4])
        #expect(RetryCount.IntervalProxy.DefaultInitialTimeInterval == 1)
        #expect(RetryCount.IntervalProxy.DefaultExponentialBackoffScaleRate == 2)
        #expect(RetryCount.IntervalProxy.exponentialBackoff(scaleRate: 0.5).baseDelay(forRetry: 3).inSeconds == 1)
    }
}
