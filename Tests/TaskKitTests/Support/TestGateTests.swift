import Testing
import TaskKit
import TaskKitTestSupport

@Suite struct TestGateTests {
    @Test func arrivalsWithoutWaitingSatisfyACountingWait() async {
        let gate = TestGate()
        let waiter = Task { await gate.waitForArrivals(3) }
        #expect(gate.arrive() == 1)
        #expect(gate.arrive() == 2)
        Task { gate.arrive() }
        await waiter.value
        #expect(gate.arrivals == 3)
        #expect(!gate.isOpen)
    }

    @Test func aCountingWaitPastItsDeadlineFailsTheTestInsteadOfHanging() async {
        let gate = TestGate()
        gate.arrive()
        await withKnownIssue {
            await gate.waitForArrivals(2, within: .milliseconds(20))
        }
    }

    @Test func waitingForSleepersHasADeadline() async throws {
        let clock = ManualClock()
        await withKnownIssue {
            await clock.waitForSleepers(count: 1, within: .milliseconds(20))
        }
        let sleeper = Task { try await clock.sleep(for: .seconds(1)) }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(1))
        try await sleeper.value
    }
}
