import Testing

@testable import TaskKitHTTP

@Suite("Retry budget: the state machine (pure)")
struct RetryBudgetStateMachineTests {
    typealias Machine = RetryBudgetStateMachine

    /// The machine behind methods an `#expect` can call; time is whole seconds.
    final class Budget {
        var machine: Machine
        init(_ budget: RetryBudget) { machine = Machine(budget: budget) }

        func sent(_ count: Int = 1, host: String = "h", at second: Int) {
            for _ in 0..<count { machine.attemptSent(host: host, now: .seconds(second)) }
        }
        func grant(_ host: String = "h", at second: Int) -> Bool { machine.grantRetry(host: host, now: .seconds(second)) }
        var totals: (attempts: Int, retries: Int) { machine.totals(of: "h") }
    }

    @Test("the floor: minimumRetries are granted whatever the ratio, then retries stay within ratio × attempts")
    func floorThenRatio() {
        let b = Budget(RetryBudget(ratio: 0.2, window: .seconds(10), minimumRetries: 2))
        b.sent(at: 0)
        #expect(b.grant(at: 0) && b.grant(at: 0), "the floor, with one attempt")
        #expect(!b.grant(at: 0), "past the floor, 3 > 0.2 × 1")
        #expect(b.totals.attempts == 1 && b.totals.retries == 2, "a refused retry counts nothing")
        b.sent(13, at: 1)
        #expect(!b.grant(at: 1), "3 > 0.2 × 14")
        b.sent(at: 1)
        #expect(b.grant(at: 1), "3 ≤ 0.2 × 15")
        #expect(!b.grant(at: 1))
        #expect(b.totals.attempts == 15 && b.totals.retries == 3)
    }

    @Test("ratio zero and no floor: no retry at all")
    func none() {
        let b = Budget(RetryBudget(ratio: 0, minimumRetries: 0))
        b.sent(100, at: 0)
        #expect(!b.grant(at: 0))
    }

    @Test("the window rolls: attempts and retries older than the window stop counting")
    func windowRolls() {
        let b = Budget(RetryBudget(ratio: 0.5, window: .seconds(10), minimumRetries: 1))
        b.sent(4, at: 0)
        #expect(b.grant(at: 0) && b.grant(at: 0))
        #expect(!b.grant(at: 5), "3 > 0.5 × 4 within the window")
        b.sent(2, at: 6)
        #expect(b.grant(at: 6), "3 ≤ 0.5 × 6")
        #expect(!b.grant(at: 9))
        #expect(b.totals.attempts == 6 && b.totals.retries == 3)
        // At 10 s the first bucket (4 attempts, 2 retries) leaves: 2 attempts, 1 retry remain.
        #expect(!b.grant(at: 10), "2 > 0.5 × 2, and the floor (1) is used")
        #expect(b.totals.attempts == 2 && b.totals.retries == 1)
        #expect(b.grant(at: 16), "all gone: the floor again")
        #expect(b.totals.attempts == 0 && b.totals.retries == 1)
    }

    @Test("taking back: an attempt or a retry whose caller left is uncounted from its bucket, if still in the window")
    func takeBack() {
        let b = Budget(RetryBudget(ratio: 0.2, window: .seconds(10), minimumRetries: 1))
        b.sent(5, at: 0)
        #expect(b.grant(at: 0))
        b.machine.takeBack(.retry, host: "h", countedAt: .seconds(0))
        b.machine.takeBack(.attempt, host: "h", countedAt: .seconds(0))
        #expect(b.totals.attempts == 4 && b.totals.retries == 0)
        #expect(b.grant(at: 1), "the floor is free again")
        b.sent(at: 12)
        b.machine.takeBack(.attempt, host: "h", countedAt: .seconds(0))
        #expect(b.totals.attempts == 1, "a bucket out of the window is not touched")
        b.machine.takeBack(.attempt, host: "other", countedAt: .seconds(0))
        #expect(b.machine.hosts["other"] == nil)
    }

    @Test("hosts are per host and bounded: a host not seen for a window is forgotten when a new host arrives")
    func hostBound() {
        let b = Budget(RetryBudget(ratio: 0.2, window: .seconds(10), minimumRetries: 1))
        b.sent(host: "a", at: 0)
        #expect(b.grant("a", at: 0))
        #expect(!b.grant("a", at: 0))
        #expect(b.grant("b", at: 1), "b has a budget of its own")
        #expect(Set(b.machine.hosts.keys) == ["a", "b"])
        b.sent(host: "b", at: 9)
        b.sent(host: "c", at: 10)
        #expect(Set(b.machine.hosts.keys) == ["b", "c"], "a, idle since 0, is dropped at 10")
        b.sent(host: "d", at: 20)
        #expect(Set(b.machine.hosts.keys) == ["d"], "b (9) and c (10) idle for a window by 20")
    }
}
