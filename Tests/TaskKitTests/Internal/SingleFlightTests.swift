import Testing
@testable import TaskKit

/// The single-flight rules ``MonoTask`` and ``KeyedMonoTask`` share, as a value.
struct SingleFlightTests {
    typealias Flight = SingleFlight<String>

    @Test func callersThatJoinAreServedInTheOrderTheyJoined() {
        var flight = Flight(waiters: [(id: 1, waiter: "first")])
        flight.join((id: 2, waiter: "second"), forced: false)
        flight.join(nil, forced: false)  // a call that waits for nothing
        flight.join((id: 3, waiter: "third"), forced: false)
        #expect(flight.waiters.map(\.waiter) == ["first", "second", "third"])
        #expect(flight.followUp == nil)
    }

    @Test func forcedCallersWaitForOneFollowUpRequestedOnce() {
        var flight = Flight(waiters: [(id: 1, waiter: "joined")])
        flight.join(nil, forced: true)  // a forced call that waits for nothing still requests it
        #expect(flight.followUp?.isEmpty == true)
        flight.join((id: 2, waiter: "forced"), forced: true)
        flight.join((id: 3, waiter: "forced too"), forced: true)
        #expect(flight.waiters.map(\.waiter) == ["joined"])
        #expect(flight.followUp?.map(\.waiter) == ["forced", "forced too"])
        #expect(flight.allWaiters().map(\.waiter) == ["joined", "forced", "forced too"])
    }

    @Test func aCancelledCallerIsTakenOutOfWhicheverListHoldsItExactlyOnce() {
        var flight = Flight(waiters: [(id: 1, waiter: "a"), (id: 2, waiter: "b")])
        flight.join((id: 3, waiter: "forced"), forced: true)
        #expect(flight.holds(2) && flight.holds(3) && !flight.holds(4))
        #expect(flight.remove(3) == "forced")
        #expect(flight.remove(3) == nil)
        #expect(flight.followUp?.isEmpty == true)  // the follow-up stays requested
        #expect(flight.remove(1) == "a")
        #expect(flight.remove(1) == nil)
        #expect(flight.waiters.map(\.waiter) == ["b"])
        #expect(flight.remove(4) == nil)
    }

    @Test func retriesFollowThePolicyToItsLastThenTheFailureIsTheResult() {
        var flight = Flight(waiters: [])
        var jitter = RetryJitter.system
        let policy = RetryCount.count(count: 3, intervalProxy: .exponential(initial: .seconds(1), scaleRate: 2))
        var delays: [Duration] = []
        while let delay = flight.nextRetryDelay(policy: policy, jitter: &jitter) { delays.append(delay) }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4)])
        #expect(flight.retriesMade == 3)
        #expect(flight.nextRetryDelay(policy: policy, jitter: &jitter) == nil)
        var never = Flight(waiters: [])
        #expect(never.nextRetryDelay(policy: .never, jitter: &jitter) == nil)
        #expect(never.retriesMade == 0)
    }
}
