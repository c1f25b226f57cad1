import Testing
@testable import TaskKit
import TaskKitTestSupport

/// Every rule of MonoTask, checked on the pure state machine: no threads, no clocks.
@Suite struct MonoTaskStateMachineTests {
    typealias Machine = MonoTaskStateMachine<Int, String>

    struct Boom: Error, Equatable {}

    static func machine(
        ttl: Duration? = .seconds(10), refreshAhead: RefreshAhead? = nil, retry: RetryCount = .never,
        failSafe: FailSafe? = nil
    ) -> Machine {
        Machine(configuration: .init(timeToLive: ttl, refreshAhead: refreshAhead, retry: retry, failSafe: failSafe))
    }

    /// Registers a waiter the way an async caller does (fast path, then registration).
    @discardableResult
    static func call(
        _ machine: inout Machine, _ waiter: String?, force: Bool = false, at now: Duration = .zero
    ) -> Machine.ExecuteAction {
        let id = machine.makeWaiterID()
        return machine.execute(waiter: waiter, id: id, forceUpdate: force, now: now)
    }

    static func started(_ action: Machine.ExecuteAction) -> UInt64? {
        if case .enqueued(let run, _) = action { return run }
        return nil
    }

    static func finished(_ action: Machine.AttemptFinishedAction) -> (waiters: [String], value: Int?, next: UInt64?)? {
        guard case .finish(let waiters, let result, let next) = action else { return nil }
        return (waiters, try? result.get(), next)
    }

    // MARK: Merging and caching

    @Test func concurrentCallersMergeIntoOneRunAndGetTheResultInOrder() {
        var m = Self.machine()
        let run = Self.started(Self.call(&m, "a"))
        #expect(run == 1)
        #expect(m.isExecuting)
        let v1 = Self.started(Self.call(&m, "b"))
        #expect(v1 == .some(nil))
        let v2 = Self.started(Self.call(&m, "c"))
        #expect(v2 == .some(nil))
        let done = Self.finished(m.attemptFinished(generation: 1, result: .success(7), now: .seconds(1)))
        #expect(done?.waiters == ["a", "b", "c"])
        #expect(done?.value == 7)
        #expect(done?.next == nil)
        #expect(!m.isExecuting)
        #expect(m.counters.loads == 1)
        #expect(m.counters.merges == 2)
    }

    @Test func aPutValueReplacesTheCachedOneAndALoadInFlightDoesNotStoreOverIt() {
        var m = Self.machine(ttl: .seconds(10))
        _ = m.put(1, expiresIn: nil, now: .zero)
        #expect(m.currentValue(now: .seconds(9)) == 1 && m.currentValue(now: .seconds(10)) == nil)
        // A forced load runs; a put meanwhile wins over its result, which goes to its waiter.
        let run = Self.started(Self.call(&m, "a", force: true, at: .seconds(1)))!
        #expect(m.put(2, expiresIn: .seconds(30), now: .seconds(2))?.value == 1)
        let done = Self.finished(m.attemptFinished(generation: run, result: .success(3), now: .seconds(3)))
        #expect(done?.waiters == ["a"] && done?.value == 3)
        #expect(m.currentValue(now: .seconds(31)) == 2)  // its own 30 s from the put
        // Its failure is its waiter's alone: nothing kept, no fail-safe, the value stays.
        let second = Self.started(Self.call(&m, "b", force: true, at: .seconds(4)))!
        _ = m.put(4, expiresIn: nil, now: .seconds(4))
        _ = m.attemptFinished(generation: second, result: .failure(Boom()), failureExpiresIn: .seconds(60), now: .seconds(5))
        #expect(m.keptFailure == nil && m.currentValue(now: .seconds(5)) == 4)
        // The next load stores again.
        let third = Self.started(Self.call(&m, "c", force: true, at: .seconds(6)))!
        _ = m.attemptFinished(generation: third, result: .success(5), now: .seconds(6))
        #expect(m.currentValue(now: .seconds(6)) == 5)
    }

    @Test func successIsCachedForTheTTLCountedFromCompletion() {
        var m = Self.machine(ttl: .seconds(10))
        Self.call(&m, "a", at: .zero)
        _ = m.attemptFinished(generation: 1, result: .success(1), now: .seconds(5))
        // 14 s after the start but only 9 s after completion: still fresh.
        guard case .hit(1, nil) = m.fastPath(forceUpdate: false, now: .seconds(14)) else {
            Issue.record("expected a cache hit")
            return
        }
        guard case .deliverCached(1, nil) = Self.call(&m, "b", at: .milliseconds(14_999)) else {
            Issue.record("expected a cache hit")
            return
        }
        #expect(m.currentValue(now: .seconds(15)) == nil)
        guard case .miss = m.fastPath(forceUpdate: false, now: .seconds(15)) else {
            Issue.record("expected a miss at the TTL")
            return
        }
        let v3 = Self.started(Self.call(&m, "c", at: .seconds(15)))
        #expect(v3 == 2)
        #expect(m.counters.hits == 2)
    }

    @Test func zeroTTLCachesNothingButStillMerges() {
        var m = Self.machine(ttl: .zero)
        let v4 = Self.started(Self.call(&m, "a"))
        #expect(v4 == 1)
        let v5 = Self.started(Self.call(&m, "b"))
        #expect(v5 == .some(nil))
        let done = Self.finished(m.attemptFinished(generation: 1, result: .success(3), now: .zero))
        #expect(done?.waiters == ["a", "b"])
        #expect(m.currentValue(now: .zero) == nil)
        let v6 = Self.started(Self.call(&m, "c"))
        #expect(v6 == 2)
    }

    @Test func aValuesOwnTimeToLiveReplacesTheConfiguredOne() {
        var m = Self.machine(ttl: .seconds(10))
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .success(1), expiresIn: .seconds(60), now: .seconds(1))
        #expect(m.currentValue(now: .milliseconds(60_999)) == 1)
        #expect(m.currentValue(now: .seconds(61)) == nil)
        // `nil` from the value: the configured time to live.
        Self.call(&m, "b", at: .seconds(61))
        _ = m.attemptFinished(generation: 2, result: .success(2), expiresIn: nil, now: .seconds(61))
        #expect(m.currentValue(now: .milliseconds(70_999)) == 2)
        #expect(m.currentValue(now: .seconds(71)) == nil)
        // Zero (or negative): delivered, not cached, and the older value is gone too.
        Self.call(&m, "c", at: .seconds(71))
        _ = m.attemptFinished(generation: 3, result: .success(3), expiresIn: .seconds(-1), now: .seconds(71))
        #expect(m.currentValue(now: .seconds(71)) == nil)
    }

    @Test func aValuesOwnTimeToLiveCachesWhereTheConfiguredOneCachesNothing() {
        var m = Self.machine(ttl: .zero)
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .success(1), expiresIn: .seconds(30), now: .zero)
        guard case .deliverCached(1, nil) = Self.call(&m, "b", at: .seconds(29)) else {
            Issue.record("a value that lives 30 s is a hit at 29 s")
            return
        }
        #expect(m.currentValue(now: .seconds(30)) == nil)
    }

    @Test func aKeptFailureAnswersCallersUntilItExpires() {
        var m = Self.machine()
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .failure(Boom()), failureExpiresIn: .seconds(30), now: .zero)
        guard case .deliverFailure(let error) = Self.call(&m, "b", at: .seconds(29)) else {
            Issue.record("the kept failure answers within its 30 s")
            return
        }
        #expect(error is Boom)
        #expect(m.counters.negativeHits == 1 && m.counters.loads == 1)
        #expect(Self.started(Self.call(&m, "c", at: .seconds(30))) == 2)  // expired: loads
        _ = m.attemptFinished(generation: 2, result: .success(1), now: .seconds(30))
        #expect(m.keptFailure == nil)  // a success ends it
        // A forced call and clearResult end it too; a failure without a time is not kept.
        Self.call(&m, "d", force: true, at: .seconds(31))
        _ = m.attemptFinished(generation: 3, result: .failure(Boom()), failureExpiresIn: .seconds(30), now: .seconds(31))
        #expect(Self.started(Self.call(&m, "e", force: true, at: .seconds(32))) == 4)
        _ = m.attemptFinished(generation: 4, result: .failure(Boom()), failureExpiresIn: .seconds(30), now: .seconds(32))
        _ = m.clearResult(strategy: .allowCompletion, restartWhenIdle: false)
        #expect(m.keptFailure == nil)
        #expect(Self.started(Self.call(&m, "f", at: .seconds(33))) == 5)
        _ = m.attemptFinished(generation: 5, result: .failure(Boom()), now: .seconds(33))
        #expect(m.keptFailure == nil)
    }

    @Test func aFailedReloadIsAnsweredWithTheExpiredValueWithinTheMaximumStaleness() {
        var m = Self.machine(
            ttl: .seconds(10), refreshAhead: .age(.seconds(5)), retry: .count(count: 1, intervalProxy: .fixed(.seconds(1))),
            failSafe: FailSafe(maximumStaleness: .seconds(20), throttle: .seconds(4))
        )
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .success(1), now: .zero)
        // Expired at 10 s: the reload's first attempt fails and is retried; the final failure
        // is answered with the expired value, kept fresh for the throttle.
        #expect(Self.started(Self.call(&m, "b", at: .seconds(11))) == 2)
        Self.call(&m, "c", at: .seconds(11))
        guard case .retry = m.attemptFinished(generation: 2, result: .failure(Boom()), now: .seconds(11)) else {
            Issue.record("the first failure is retried"); return
        }
        let due2 = m.retryDue(generation: 2)
        #expect(due2)
        let answered = Self.finished(m.attemptFinished(generation: 2, result: .failure(Boom()), now: .seconds(12)))
        #expect(answered?.waiters == ["b", "c"] && answered?.value == 1)
        #expect(m.counters.failSafeHits == 2)
        // Fresh until 12 s + 4 s, and no refresh ahead meanwhile (the throttle decides).
        guard case .deliverCached(1, startRun: nil) = Self.call(&m, "d", at: .seconds(15)) else {
            Issue.record("the throttle serves the value without a load"); return
        }
        #expect(m.currentValue(now: .seconds(16)) == nil)
        // Reloads keep failing: answered until 10 s + 20 s, then the callers get the error.
        #expect(Self.started(Self.call(&m, "e", at: .seconds(30))) == 3)
        _ = m.attemptFinished(generation: 3, result: .failure(Boom()), now: .seconds(30))
        let due3 = m.retryDue(generation: 3)
        #expect(due3)
        #expect(Self.finished(m.attemptFinished(generation: 3, result: .failure(Boom()), now: .seconds(30)))?.value == 1)
        #expect(Self.started(Self.call(&m, "f", at: .seconds(34))) == 4)
        _ = m.attemptFinished(generation: 4, result: .failure(Boom()), now: .seconds(34))
        let due4 = m.retryDue(generation: 4)
        #expect(due4)
        let failed = Self.finished(m.attemptFinished(generation: 4, result: .failure(Boom()), now: .seconds(34)))
        #expect(failed?.waiters == ["f"] && failed?.value == nil)
        // A success ends the fail-safe.
        Self.call(&m, "g", at: .seconds(35))
        _ = m.attemptFinished(generation: 5, result: .success(2), now: .seconds(35))
        #expect(m.cached?.failSafeSince == nil && m.currentValue(now: .seconds(44)) == 2)
    }

    @Test func theFailSafeNeverAnswersACancellationAFreshValuesForcedLoadOrNothingCached() {
        var m = Self.machine(ttl: .seconds(10), failSafe: FailSafe(maximumStaleness: .seconds(60)))
        Self.call(&m, "a")
        #expect(Self.finished(m.attemptFinished(generation: 1, result: .failure(Boom()), now: .zero))?.value == nil)
        Self.call(&m, "b")
        _ = m.attemptFinished(generation: 2, result: .success(1), now: .zero)
        Self.call(&m, "forced", force: true, at: .seconds(1))
        #expect(Self.finished(m.attemptFinished(generation: 3, result: .failure(Boom()), now: .seconds(1)))?.value == nil)
        Self.call(&m, "late", at: .seconds(11))
        let cancelled = m.attemptFinished(generation: 4, result: .failure(CancellationError()), now: .seconds(11))
        #expect(Self.finished(cancelled)?.value == nil)
        #expect(m.counters.failSafeHits == 0)
    }

    @Test func aSoftTimeoutAnswersAWaitingCallerWithTheExpiredValueOnce() {
        var m = Self.machine(ttl: .seconds(10), failSafe: FailSafe(maximumStaleness: .seconds(60), softTimeout: .seconds(1)))
        guard case .enqueued(1, softTimeout: false) = Self.call(&m, "first") else {
            Issue.record("nothing cached: no soft timeout"); return
        }
        _ = m.attemptFinished(generation: 1, result: .success(1), now: .zero)
        guard case .enqueued(2, softTimeout: true) = Self.call(&m, "a", at: .seconds(12)) else {
            Issue.record("an expired value at hand: a soft timeout"); return
        }
        let a = m.lastWaiterID
        guard case .enqueued(nil, softTimeout: false) = Self.call(&m, "forced", force: true, at: .seconds(12)) else {
            Issue.record("a forced caller waits"); return
        }
        let answered = m.softTimeoutEnded(id: a, now: .seconds(13))
        #expect(answered?.waiter == "a" && answered?.value == 1)
        let again = m.softTimeoutEnded(id: a, now: .seconds(13))
        #expect(again == nil && m.counters.softTimeouts == 1)
        let done = Self.finished(m.attemptFinished(generation: 2, result: .success(2), now: .seconds(14)))
        #expect(done?.waiters.isEmpty == true && done?.value == 2)
        #expect(m.currentValue(now: .seconds(14)) == 2)
        // Past the maximum staleness: the caller waits for the load.
        guard case .enqueued(_, softTimeout: false) = Self.call(&m, "late", at: .seconds(100)) else {
            Issue.record("past the bound: no soft timeout"); return
        }
    }

    @Test func expiryJitterShortensEachStoredLifetimeByAtMostTheJitter() {
        var lifetimes: Set<Duration> = []
        for seed in 0..<20 {
            var m = Machine(
                configuration: .init(
                    timeToLive: .seconds(60), refreshAhead: nil, retry: .never,
                    jitter: RetryJitter(SeededRandomNumberGenerator(seed: UInt64(seed))), expiryJitter: .seconds(6)
                )
            )
            Self.call(&m, "a")
            _ = m.attemptFinished(generation: 1, result: .success(1), now: .zero)
            let expiresAt = m.cached!.expiresAt!
            #expect(expiresAt >= .seconds(54) && expiresAt <= .seconds(60))
            lifetimes.insert(expiresAt)
        }
        #expect(lifetimes.count > 10)  // spread, not one value
        var forever = Self.machine(ttl: nil)
        Self.call(&forever, "a")
        _ = forever.attemptFinished(generation: 1, result: .success(1), now: .zero)
        #expect(forever.cached?.expiresAt == nil)
    }

    @Test func infiniteTTLCachesUntilCleared() {
        var m = Self.machine(ttl: nil)
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .success(3), now: .zero)
        #expect(m.currentValue(now: .seconds(1_000_000_000)) == 3)
        guard case .none = m.clearResult(strategy: .allowCompletion, restartWhenIdle: false) else {
            Issue.record("idle clear without restart does nothing else")
            return
        }
        #expect(m.currentValue(now: .zero) == nil)
    }

    @Test func failuresAreNeverCached() {
        var m = Self.machine()
        Self.call(&m, "a")
        let done = m.attemptFinished(generation: 1, result: .failure(Boom()), now: .zero)
        guard case .finish(let waiters, .failure(let error), nil) = done else {
            Issue.record("expected a failed finish")
            return
        }
        #expect(waiters == ["a"])
        #expect(error is Boom)
        #expect(m.currentValue(now: .zero) == nil)
        let v7 = Self.started(Self.call(&m, "b"))
        #expect(v7 == 2)
    }

    @Test func fireAndForgetStartsARunWithoutWaiters() {
        var m = Self.machine()
        let v8 = Self.started(Self.call(&m, nil))
        #expect(v8 == 1)
        let v9 = Self.started(Self.call(&m, nil))
        #expect(v9 == .some(nil))
        #expect(m.counters.merges == 0)
        let done = Self.finished(m.attemptFinished(generation: 1, result: .success(2), now: .zero))
        #expect(done?.waiters == [])
        #expect(m.currentValue(now: .zero) == 2)
    }

    // MARK: Retry

    @Test func retriesExactlyCountTimesAndWaitersSeeOnlyTheFinalOutcome() {
        var m = Self.machine(retry: .count(count: 2, intervalProxy: .exponential(initial: .seconds(1))))
        Self.call(&m, "a")
        guard case .retry(after: .seconds(1)) = m.attemptFinished(generation: 1, result: .failure(Boom()), now: .zero)
        else {
            Issue.record("expected the first retry after 1 s")
            return
        }
        #expect(m.isExecuting)
        Self.call(&m, "b")  // joins during backoff
        let v10 = m.retryDue(generation: 1)
        #expect(v10)
        guard case .retry(after: .seconds(2)) = m.attemptFinished(generation: 1, result: .failure(Boom()), now: .zero)
        else {
            Issue.record("expected the second retry after 2 s")
            return
        }
        let v11 = m.retryDue(generation: 1)
        #expect(v11)
        guard case .finish(let waiters, .failure, nil) = m.attemptFinished(
            generation: 1, result: .failure(Boom()), now: .zero)
        else {
            Issue.record("two retries, then the final failure")
            return
        }
        #expect(waiters == ["a", "b"])
        #expect(m.counters.retries == 2)
        #expect(m.counters.loads == 1)
    }

    @Test func jitterComesFromTheInjectedGeneratorSoEveryDelayIsKnown() {
        let proxy = IntervalProxy.exponential(initial: .seconds(1), scaleRate: 2, jitter: .decorrelated)
            .capped(at: .seconds(10))
        var m = Machine(configuration: .init(
            timeToLive: .seconds(10), refreshAhead: nil, retry: .count(count: 4, intervalProxy: proxy),
            jitter: RetryJitter(SeededRandomNumberGenerator(seed: 11))
        ))
        var expected = RetryCount.count(count: 4, intervalProxy: proxy).makeSchedule()
        var reference = SeededRandomNumberGenerator(seed: 11)
        Self.call(&m, "a")
        for retry in 1...4 {
            guard case .retry(let delay) = m.attemptFinished(generation: 1, result: .failure(Boom()), now: .zero)
            else {
                Issue.record("expected retry \(retry)")
                return
            }
            let pinned = expected.nextDelay(using: &reference)
            #expect(delay == pinned)
            let due = m.retryDue(generation: 1)
            #expect(due)
        }
    }

    @Test func countZeroMeansNoRetry() {
        var m = Self.machine(retry: .count(count: 0))
        Self.call(&m, "a")
        guard case .finish = m.attemptFinished(generation: 1, result: .failure(Boom()), now: .zero) else {
            Issue.record("count 0 must not retry")
            return
        }
    }

    @Test func successAfterRetryIsDeliveredAndCached() {
        var m = Self.machine(retry: 3)
        Self.call(&m, "a")
        guard case .retry(after: .zero) = m.attemptFinished(generation: 1, result: .failure(Boom()), now: .zero) else {
            Issue.record("expected an immediate retry")
            return
        }
        let v12 = m.retryDue(generation: 1)
        #expect(v12)
        let done = Self.finished(m.attemptFinished(generation: 1, result: .success(9), now: .zero))
        #expect(done?.waiters == ["a"])
        #expect(done?.value == 9)
        #expect(m.currentValue(now: .zero) == 9)
    }

    // MARK: forceUpdate

    @Test func forceUpdateDuringARunChainsAFreshRunAfterIt() {
        var m = Self.machine()
        Self.call(&m, "old")
        let v13 = Self.started(Self.call(&m, "forced", force: true))
        #expect(v13 == .some(nil))  // nothing beside it
        Self.call(&m, "joiner")  // a normal caller accepts the current run
        let first = Self.finished(m.attemptFinished(generation: 1, result: .success(1), now: .zero))
        #expect(first?.waiters == ["old", "joiner"])
        #expect(first?.next == 2)  // the follow-up starts only now
        #expect(m.isExecuting)
        let second = Self.finished(m.attemptFinished(generation: 2, result: .success(2), now: .zero))
        #expect(second?.waiters == ["forced"])
        #expect(second?.value == 2)
        #expect(m.currentValue(now: .zero) == 2)
    }

    @Test func forceUpdateWhenIdleIgnoresTheCache() {
        var m = Self.machine()
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .success(1), now: .zero)
        guard case .miss = m.fastPath(forceUpdate: true, now: .zero) else {
            Issue.record("forced calls skip the cache")
            return
        }
        let v14 = Self.started(Self.call(&m, "b", force: true))
        #expect(v14 == 2)
    }

    @Test func aFailedForcedRunKeepsThePreviousCachedValue() {
        var m = Self.machine()
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .success(1), now: .zero)
        Self.call(&m, "b", force: true)
        _ = m.attemptFinished(generation: 2, result: .failure(Boom()), now: .zero)
        #expect(m.currentValue(now: .zero) == 1)
    }

    @Test func forceUpdateDuringBackoffStillWaitsForAFreshRun() {
        var m = Self.machine(retry: 1)
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .failure(Boom()), now: .zero)
        Self.call(&m, "forced", force: true)
        let v15 = m.retryDue(generation: 1)
        #expect(v15)
        let first = Self.finished(m.attemptFinished(generation: 1, result: .success(1), now: .zero))
        #expect(first?.waiters == ["a"])
        #expect(first?.next == 2)
    }

    @Test func fireAndForgetForceUpdateRequestsAFollowUpRun() {
        var m = Self.machine()
        Self.call(&m, "a")
        Self.call(&m, nil, force: true)
        Self.call(&m, nil, force: true)  // still only one follow-up
        let first = Self.finished(m.attemptFinished(generation: 1, result: .success(1), now: .zero))
        #expect(first?.next == 2)
        let second = Self.finished(m.attemptFinished(generation: 2, result: .success(2), now: .zero))
        #expect(second?.next == nil)
        #expect(m.counters.loads == 2)
    }

    // MARK: clearResult

    @Test func cancelFailsEveryWaiterAtOnceAndDiscardsTheLateResult() {
        var m = Self.machine()
        Self.call(&m, "a")
        Self.call(&m, "b")
        Self.call(&m, "forced", force: true)
        guard case .failWaiters(let waiters, cancelRun: 1) = m.clearResult(strategy: .cancel, restartWhenIdle: true)
        else {
            Issue.record("expected every waiter to fail and run 1 to be cancelled")
            return
        }
        #expect(waiters == ["a", "b", "forced"])
        #expect(!m.isExecuting)  // shouldRestartWhenIDLE does not apply: it was not idle
        #expect(m.zombieBodies == 1)
        guard case .none = m.attemptFinished(generation: 1, result: .success(5), now: .zero) else {
            Issue.record("a cancelled run's result is discarded")
            return
        }
        #expect(m.currentValue(now: .zero) == nil)
        #expect(m.zombieBodies == 0)
        #expect(m.counters.cancellations == 1)
    }

    @Test func cancelStopsAPendingRetryForGood() {
        var m = Self.machine(retry: .infinity(intervalProxy: .fixed(.seconds(1))))
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .failure(Boom()), now: .zero)
        guard case .failWaiters(["a"], cancelRun: 1) = m.clearResult(strategy: .cancel, restartWhenIdle: false) else {
            Issue.record("expected the waiter to fail")
            return
        }
        #expect(m.zombieBodies == 0)  // no body was running during the backoff
        let v16 = m.retryDue(generation: 1)
        #expect(!v16)
        // A new caller starts a fresh run at once; the old retry still never runs.
        let v17 = Self.started(Self.call(&m, "b"))
        #expect(v17 == 2)
        let v18 = m.retryDue(generation: 1)
        #expect(!v18)
    }

    @Test func afterCancelTheNextRunWaitsForTheCancelledBodyToReturn() {
        var m = Self.machine()
        Self.call(&m, "a")
        _ = m.clearResult(strategy: .cancel, restartWhenIdle: false)
        // The cancelled body is still running: the new run is created but not started.
        let v19 = Self.started(Self.call(&m, "b"))
        #expect(v19 == .some(nil))
        #expect(m.isExecuting)
        Self.call(&m, "forced", force: true)  // the pending run is fresh: it serves forced callers too
        guard case .startRun(2) = m.attemptFinished(generation: 1, result: .success(1), now: .zero) else {
            Issue.record("the pending run starts when the zombie returns")
            return
        }
        let done = Self.finished(m.attemptFinished(generation: 2, result: .success(2), now: .zero))
        #expect(done?.waiters == ["b", "forced"])
        #expect(done?.next == nil)
    }

    @Test func cancelOfAPendingRunFailsItsWaitersWithoutAnotherZombie() {
        var m = Self.machine()
        Self.call(&m, "a")
        _ = m.clearResult(strategy: .cancel, restartWhenIdle: false)
        Self.call(&m, "b")
        guard case .failWaiters(["b"], cancelRun: nil) = m.clearResult(strategy: .cancel, restartWhenIdle: false) else {
            Issue.record("expected b to fail")
            return
        }
        #expect(m.zombieBodies == 1)
        guard case .none = m.attemptFinished(generation: 1, result: .success(1), now: .zero) else {
            Issue.record("nothing pending any more")
            return
        }
        let v20 = Self.started(Self.call(&m, "c"))
        #expect(v20 == 3)
    }

    @Test func restartDiscardsTheRunningResultAndServesEveryoneFromAFreshRun() {
        var m = Self.machine()
        Self.call(&m, "old")
        guard case .none = m.clearResult(strategy: .restart, restartWhenIdle: false) else {
            Issue.record(".restart must not start anything while the body runs")
            return
        }
        Self.call(&m, "new")
        Self.call(&m, "forced", force: true)  // the restart will be fresh for it too
        guard case .startRun(2) = m.attemptFinished(generation: 1, result: .success(1), now: .zero) else {
            Issue.record("the fresh run starts when the old one ends")
            return
        }
        #expect(m.currentValue(now: .zero) == nil)  // the discarded result was not cached
        let done = Self.finished(m.attemptFinished(generation: 2, result: .success(2), now: .zero))
        #expect(done?.waiters == ["old", "new", "forced"])
        #expect(done?.value == 2)
    }

    @Test func restartDuringBackoffReplacesTheSleepingRunAtOnce() {
        var m = Self.machine(retry: .count(count: 5, intervalProxy: .fixed(.seconds(60))))
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .failure(Boom()), now: .zero)
        guard case .startRun(2, cancelRun: 1) = m.clearResult(strategy: .restart, restartWhenIdle: false) else {
            Issue.record("expected run 2 to replace run 1")
            return
        }
        let v21 = m.retryDue(generation: 1)
        #expect(!v21)
        let done = Self.finished(m.attemptFinished(generation: 2, result: .success(2), now: .zero))
        #expect(done?.waiters == ["a"])
    }

    @Test func allowCompletionDeliversAndCaches() {
        var m = Self.machine()
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .success(1), now: .zero)
        Self.call(&m, "b", force: true)
        guard case .none = m.clearResult(strategy: .allowCompletion, restartWhenIdle: true) else {
            Issue.record("allowCompletion changes nothing about the run")
            return
        }
        #expect(m.currentValue(now: .zero) == nil)
        let done = Self.finished(m.attemptFinished(generation: 2, result: .success(2), now: .zero))
        #expect(done?.waiters == ["b"])
        #expect(m.currentValue(now: .zero) == 2)
    }

    @Test func restartWhenIdleStartsARunThatLaterCallersJoin() {
        var m = Self.machine()
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .success(1), now: .zero)
        guard case .startRun(2, cancelRun: nil) = m.clearResult(strategy: .cancel, restartWhenIdle: true) else {
            Issue.record("expected an idle restart")
            return
        }
        #expect(m.isExecuting)
        let v22 = Self.started(Self.call(&m, "late"))
        #expect(v22 == .some(nil))
        let done = Self.finished(m.attemptFinished(generation: 2, result: .success(2), now: .zero))
        #expect(done?.waiters == ["late"])
        #expect(m.counters.merges == 1)
    }

    @Test func idleClearWithoutRestartOnlyDropsTheCache() {
        var m = Self.machine()
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .success(1), now: .zero)
        guard case .none = m.clearResult(strategy: .restart, restartWhenIdle: false) else {
            Issue.record("nothing to start")
            return
        }
        #expect(!m.isExecuting)
        #expect(m.currentValue(now: .zero) == nil)
    }

    // MARK: Caller cancellation

    @Test func aCancelledCallerLeavesAndTheRunGoesOnForTheOthers() {
        var m = Self.machine()
        guard case .miss(let id) = m.fastPath(forceUpdate: false, now: .zero) else {
            Issue.record("expected a miss")
            return
        }
        _ = m.execute(waiter: "leaver", id: id, forceUpdate: false, now: .zero)
        Self.call(&m, "stayer")
        let v23 = m.cancelWaiter(id)
        #expect(v23 == "leaver")
        let v24 = m.cancelWaiter(id)
        #expect(v24 == nil)  // exactly once
        let done = Self.finished(m.attemptFinished(generation: 1, result: .success(4), now: .zero))
        #expect(done?.waiters == ["stayer"])
        #expect(m.currentValue(now: .zero) == 4)
        #expect(m.counters.callerCancellations == 1)
    }

    @Test func aCancelledForcedCallerLeavesTheFollowUpList() {
        var m = Self.machine()
        Self.call(&m, "a")
        let id = m.makeWaiterID()
        _ = m.execute(waiter: "forced", id: id, forceUpdate: true, now: .zero)
        let v25 = m.cancelWaiter(id)
        #expect(v25 == "forced")
        let done = Self.finished(m.attemptFinished(generation: 1, result: .success(1), now: .zero))
        #expect(done?.next == 2)  // the follow-up was requested; it still runs (and caches)
        let second = Self.finished(m.attemptFinished(generation: 2, result: .success(2), now: .zero))
        #expect(second?.waiters == [])
    }

    @Test func aCallerCancelledBeforeRegistrationIsNotStoredAndStartsNothing() {
        var m = Self.machine()
        let id = m.makeWaiterID()
        guard case .callerCancelled = m.execute(waiter: "x", id: id, forceUpdate: false, now: .zero, callerCancelled: true)
        else {
            Issue.record("expected the caller to be turned away")
            return
        }
        #expect(!m.isExecuting)
        let v26 = m.cancelWaiter(id)
        #expect(v26 == nil)
    }

    @Test func aCancelAfterDeliveryFindsNothing() {
        var m = Self.machine()
        let id = m.makeWaiterID()
        _ = m.execute(waiter: "a", id: id, forceUpdate: false, now: .zero)
        _ = m.attemptFinished(generation: 1, result: .success(1), now: .zero)
        let v27 = m.cancelWaiter(id)
        #expect(v27 == nil)
    }

    // MARK: Stale-while-revalidate

    @Test func staleWhileRevalidateReturnsTheValueAndStartsOneBackgroundRefresh() {
        var m = Self.machine(ttl: .seconds(60), refreshAhead: .age(.seconds(10)))
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .success(1), now: .zero)
        guard case .hit(1, startRun: nil) = m.fastPath(forceUpdate: false, now: .seconds(9)) else {
            Issue.record("young value: plain hit")
            return
        }
        guard case .hit(1, startRun: 2) = m.fastPath(forceUpdate: false, now: .seconds(10)) else {
            Issue.record("old value: hit and refresh")
            return
        }
        guard case .deliverCached(1, startRun: nil) = Self.call(&m, "b", at: .seconds(11)) else {
            Issue.record("refresh in progress: plain hit")
            return
        }
        let done = Self.finished(m.attemptFinished(generation: 2, result: .success(2), now: .seconds(12)))
        #expect(done?.waiters == [])
        #expect(m.currentValue(now: .seconds(12)) == 2)
        guard case .hit(2, startRun: nil) = m.fastPath(forceUpdate: false, now: .seconds(21)) else {
            Issue.record("the refreshed value is young again")
            return
        }
    }

    @Test func aFailedBackgroundRefreshKeepsServingTheCachedValue() {
        var m = Self.machine(ttl: .seconds(60), refreshAhead: .age(.seconds(10)))
        Self.call(&m, "a")
        _ = m.attemptFinished(generation: 1, result: .success(1), now: .zero)
        _ = m.fastPath(forceUpdate: false, now: .seconds(30))
        _ = m.attemptFinished(generation: 2, result: .failure(Boom()), now: .seconds(31))
        #expect(m.currentValue(now: .seconds(59)) == 1)
        #expect(m.currentValue(now: .seconds(60)) == nil)
    }
}
