import Testing
import TaskKit
import TaskKitTestSupport
import TaskKitTesting

@Suite struct TestGateTests {
    @Test func arrivalsWithoutWaitingSatisfyACountingWait() async throws {
        let gate = TestGate()
        let waiter = Task { await gate.waitForArrivals(3) }
        #expect(gate.arrive() == 1)
        #expect(gate.arrive() == 2)
        Task { gate.arrive() }
        try await waiter.boundedValue()
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
        try await sleeper.boundedValue()
    }

    @Test func aTaskValueWithinItsDeadlineIsTheValue() async throws {
        #expect(try await Task { 7 }.boundedValue() == 7)
        struct Failure: Error {}
        await #expect(throws: Failure.self) { try await Task { throw Failure() }.boundedValue() }
    }

    @Test func aTaskValuePastItsDeadlineFailsTheTestInsteadOfHanging() async throws {
        let gate = TestGate()
        let stuck = Task { await gate.wait() }
        await withKnownIssue {
            await #expect(throws: TaskDeadlineExceeded.self) { try await stuck.boundedValue(within: .milliseconds(20)) }
        }
        gate.open()
        try await stuck.boundedValue()
    }

    @Test func theDeadlineScaleIsAPositiveNumberOrOne() {
        #expect(TestDeadline.scale(from: nil) == 1)
        #expect(TestDeadline.scale(from: "10") == 10)
        #expect(TestDeadline.scale(from: "2.5") == 2.5)
        for ignored in ["", "0", "-3", "ten", "inf", "nan"] {
            #expect(TestDeadline.scale(from: ignored) == 1, "\(ignored)")
        }
        #expect(TestDeadline.standard == .seconds(30) * TestDeadline.scale)
        #expect(TestDeadline.scaled(.seconds(2)) == .seconds(2) * TestDeadline.scale)
    }
}
