import Testing
import TaskKit
import TaskKitTestSupport
import TaskKitTesting

@Suite struct ManualClockTests {
    @Test func sleepersWakeOnlyWhenTimeIsAdvancedPastTheirDeadline() async throws {
        let clock = ManualClock()
        let task = Task { try await clock.sleep(for: .seconds(5)) }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(4))
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .seconds(1))
        try await task.boundedValue()
        #expect(clock.sleeperCount == 0)
    }

    @Test func cancellingASleeperResumesItWithCancellationError() async {
        let clock = ManualClock()
        let task = Task { try await clock.sleep(for: .seconds(5)) }
        await clock.waitForSleepers(count: 1)
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.boundedValue() }
        #expect(clock.sleeperCount == 0)
    }
}
