import TaskKit
import TaskKitTestSupport
import TaskKitTesting
import Testing

/// The examples of the TaskKitTesting catalog (`Sources/TaskKitTesting/TaskKitTesting.docc`; the
/// first is also the README's) and of `ManualClock`'s documentation, as written there.
@Suite struct TaskKitTestingArticleExamples {
    @Test func theTokenIsLoadedAgainAfterItsTimeToLive() async throws {
        let clock = ManualClock()
        let token = MonoTask<String>(resultExpireDuration: .seconds(3600), clock: clock) {
            .success("token")
        }
        #expect(try await token.executeThrows() == "token")
        #expect(token.currentResult == "token")

        clock.advance(by: .seconds(3600))            // an hour, at once
        #expect(token.currentResult == nil)          // expired: the next call loads again
    }

    @Test func aDelayedTaskStartsWhenItsDelayHasPassed() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let answer = Task { try await manager.value(after: .seconds(5)) { 42 } }

        try await clock.waitForSleepers(count: 1, timeout: .seconds(10))
        clock.advance(by: .seconds(5))
        #expect(try await answer.value == 42)
    }

    @Test func manualClockDocumentationExample() async throws {
        let clock = ManualClock()
        let cache = MonoTask<String>(resultExpireDuration: .seconds(60), clock: clock) { .success("token") }
        _ = await cache.asyncExecute()
        clock.advance(by: .seconds(60))
        #expect(cache.currentResult == nil)   // expired, without waiting a minute
    }
}

@Suite struct ManualClockWaitTests {
    @Test func aWaitForSleepersPastItsTimeoutThrowsWaitTimeout() async throws {
        let clock = ManualClock()
        let sleeper = Task { try await clock.sleep(for: .seconds(1)) }
        try await clock.waitForSleepers(count: 1, timeout: .seconds(30))
        let error = await #expect(throws: ManualClock.WaitTimeout.self) {
            try await clock.waitForSleepers(count: 2, timeout: .milliseconds(20))
        }
        #expect(error?.expected == 2)
        #expect(error?.sleeping == 1)
        #expect(error?.timeout == .milliseconds(20))
        clock.advance(by: .seconds(1))
        try await sleeper.boundedValue()
    }

    @Test func aCancelledWaitForSleepersThrowsCancellationError() async throws {
        let clock = ManualClock()
        let waiter = Task { try await clock.waitForSleepers(count: 1, timeout: .seconds(30)) }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.boundedValue() }
    }

    @Test func aWaitForSleepersAlreadySatisfiedReturnsAtOnce() async throws {
        let clock = ManualClock()
        try await clock.waitForSleepers(count: 0, timeout: .milliseconds(1))
        #expect(clock.advanceToNextDeadline() == false)
        #expect(clock.now == ManualClock.Instant(offset: .zero))
    }
}
