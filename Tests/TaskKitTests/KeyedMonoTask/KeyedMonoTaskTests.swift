import Foundation
import Testing
import TaskKitTestSupport
import TaskKitTesting
@testable import TaskKit

/// The real `KeyedMonoTask`, driven by a `ManualClock` (no real sleeps for library-owned time).
/// Each test names the rule of issue 21 it checks.
@Suite(.scaledTimeLimit(minutes: 1))
struct KeyedMonoTaskTests {
    typealias Cache = KeyedMonoTask<Int, String>

    static func make(
        _ recorder: KeyedLoadRecorder, maximumEntries: Int = 100, ttl: Duration = .seconds(10),
        stale: Duration = .zero, retry: RetryCount = .never, clock: ManualClock = ManualClock()
    ) -> Cache {
        Cache(
            maximumEntries: maximumEntries, resultExpireDuration: ttl, staleWhileRevalidate: stale,
            retry: retry, clock: clock
        ) { try await recorder.load($0) }
    }

    // MARK: Per key, MonoTask's rules

    @Test func concurrentCallersOfAKeyShareOneLoad() async throws {
        let recorder = KeyedLoadRecorder(gated: [1])
        let cache = Self.make(recorder)
        let results = await withTaskGroup(of: String?.self) { group in
            for _ in 0..<100 {
                group.addTask { try? await cache.value(for: 1) }
            }
            await eventually("99 callers merged") { cache.counters.merges == 99 }
            recorder.open(1)
            return await group.reduce(into: [String?]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: "1#1", count: 100))
        #expect(recorder.started(1) == 1)
        #expect(cache.counters.loads == 1)
        #expect(cache.counters.misses == 1)
    }

    @Test func aResultIsCachedForTheTTLCountedFromItsCompletion() async throws {
        let clock = ManualClock()
        let recorder = KeyedLoadRecorder(gated: [1])
        let cache = Self.make(recorder, ttl: .seconds(10), clock: clock)
        async let first = cache.value(for: 1)
        await eventually("load waiting") { recorder.waiting(1) == 1 }
        clock.advance(by: .seconds(5))  // the load takes 5 s: the TTL starts when it ends
        recorder.open(1)
        #expect(try await first == "1#1")
        clock.advance(by: .seconds(9))
        #expect(try await cache.value(for: 1) == "1#1")
        #expect(cache.cachedValue(for: 1) == "1#1")
        clock.advance(by: .seconds(1))
        #expect(cache.cachedValue(for: 1) == nil)
        #expect(try await cache.value(for: 1) == "1#2")
        #expect(cache.counters.hits == 1)
    }

    @Test func aZeroTTLCachesNothingButCallersStillShareALoad() async throws {
        let recorder = KeyedLoadRecorder(gated: [1])
        let cache = Self.make(recorder, ttl: .zero)
        async let a = cache.value(for: 1)
        async let b = cache.value(for: 1)
        await eventually("merged") { cache.counters.merges == 1 }
        recorder.open(1)
        #expect(try await a == "1#1")
        #expect(try await b == "1#1")
        #expect(cache.count == 0)
        #expect(cache.cachedValue(for: 1) == nil)
        #expect(try await cache.value(for: 1) == "1#2")
    }

    @Test func aFailureReachesEveryCallerUnchangedAndIsNeverCached() async throws {
        let recorder = KeyedLoadRecorder(gated: [1])
        recorder.setFailing(1)
        let cache = Self.make(recorder)
        async let a = cache.value(for: 1)
        async let b = cache.value(for: 1)
        await eventually("merged") { cache.counters.merges == 1 }
        recorder.open(1)
        do { _ = try await a; Issue.record("a succeeded") } catch { #expect(error as? KeyedTestError == KeyedTestError(key: 1, attempt: 1)) }
        do { _ = try await b; Issue.record("b succeeded") } catch { #expect(error as? KeyedTestError == KeyedTestError(key: 1, attempt: 1)) }
        #expect(cache.count == 0)
        #expect(cache.counters.failures == 1)
        recorder.setFailing(1, false)
        #expect(try await cache.value(for: 1) == "1#2")
    }

    @Test func failedLoadsAndRetriesAreLoggedWithTheKeyAndSuccessesAreNot() async throws {
        struct Failure: Error {}
        let (logger, store) = CapturingLogHandler.logger(level: .debug)
        let cache = Cache(
            maximumEntries: 10, retry: .count(count: 1, intervalProxy: .fixed(.zero)), clock: ManualClock(),
            logger: logger
        ) { key in
            if key == 7 { throw Failure() }
            return "\(key)"
        }
        #expect(try await cache.value(for: 1) == "1")
        #expect(store.all.isEmpty)
        await #expect(throws: Failure.self) { try await cache.value(for: 7) }
        let records = store.all
        #expect(records.map(\.level) == [.debug, .debug])
        #expect(records.map { $0.metadata["key"] } == ["7", "7"])
        #expect(records.first?.message.hasPrefix("KeyedMonoTask: load retries after") == true)
        #expect(records.last?.message == "KeyedMonoTask: load failed: Failure()")
        #expect(records.last?.metadata["callers"] == "1")
    }

    @Test func failedBatchesAndTheirRetriesAreLogged() async throws {
        struct Failure: Error {}
        let (logger, store) = CapturingLogHandler.logger(level: .debug)
        let cache = Cache(
            maximumEntries: 10, retry: .count(count: 1, intervalProxy: .fixed(.zero)), maximumBatchSize: 4,
            clock: ManualClock(), logger: logger
        ) { _ in throw Failure() }
        await #expect(throws: Failure.self) { try await cache.value(for: 3) }
        #expect(store.all.map(\.message) == [
            "KeyedMonoTask: batch load of 1 keys retries after 0.0 seconds",
            "KeyedMonoTask: batch load of 1 keys failed: Failure()",
        ])
    }

    @Test func retriesFollowRetryCountWithBackoffOnTheInjectedClock() async throws {
        let clock = ManualClock()
        let recorder = KeyedLoadRecorder()
        recorder.setFailing(1)
        let cache = Self.make(
            recorder, retry: .count(count: 2, intervalProxy: .exponential(initial: .seconds(1), scaleRate: 2)),
            clock: clock
        )
        async let result = cache.value(for: 1)
        await clock.waitForSleepers(count: 1)
        #expect(recorder.started(1) == 1)
        clock.advance(by: .milliseconds(999))
        #expect(clock.sleeperCount == 1)
        clock.advance(by: .milliseconds(1))
        await clock.waitForSleepers(count: 1)
        #expect(recorder.started(1) == 2)
        recorder.setFailing(1, false)  // the third attempt succeeds
        clock.advance(by: .seconds(2))  // the second delay doubled
        #expect(try await result == "1#3")
        #expect(cache.counters.retries == 2)
        #expect(cache.counters.loads == 1)
        #expect(cache.cachedValue(for: 1) == "1#3")
    }

    @Test func theFinalFailureAfterRetriesIsWhatCallersSee() async throws {
        let clock = ManualClock()
        let recorder = KeyedLoadRecorder()
        recorder.setFailing(1)
        let cache = Self.make(recorder, retry: 2, clock: clock)
        await #expect(throws: KeyedTestError(key: 1, attempt: 3)) { try await cache.value(for: 1) }
        #expect(cache.counters.failures == 1)
        #expect(cache.count == 0)
    }

    @Test func forceUpdateDuringALoadRunsAFreshLoadAfterItAndOthersJoinTheLoadInFlight() async throws {
        let recorder = KeyedLoadRecorder(gated: [1])
        let cache = Self.make(recorder)
        async let first = cache.value(for: 1)
        await eventually("first load") { recorder.waiting(1) == 1 }
        async let forced = cache.value(for: 1, forceUpdate: true)
        await eventually("forced caller queued") { cache.counters.merges == 1 }
        async let joiner = cache.value(for: 1)
        await eventually("plain caller joined") { cache.counters.merges == 2 }
        #expect(recorder.maximumOverlap == 1)
        recorder.open(1)
        #expect(try await first == "1#1")
        #expect(try await joiner == "1#1")
        #expect(try await forced == "1#2")  // never the result of a load that began before it
        #expect(recorder.maximumOverlap == 1)  // the follow-up ran after, never beside
        #expect(cache.cachedValue(for: 1) == "1#2")
    }

    @Test func withNothingCachedCallersArrivingDuringAForcedLoadJoinIt() async throws {
        let recorder = KeyedLoadRecorder(gated: [1])
        let cache = Self.make(recorder)
        async let forced = cache.value(for: 1, forceUpdate: true)
        await eventually("forced load") { recorder.waiting(1) == 1 }
        async let joiner = cache.value(for: 1)
        await eventually("joined") { cache.counters.merges == 1 }
        recorder.open(1)
        #expect(try await forced == "1#1")
        #expect(try await joiner == "1#1")
        #expect(recorder.started(1) == 1)
    }

    @Test func aForcedLoadWithAFreshValueKeepsServingItAndAFailedOneLeavesItInPlace() async throws {
        let recorder = KeyedLoadRecorder()
        let cache = Self.make(recorder)
        #expect(try await cache.value(for: 1) == "1#1")
        recorder.close(1)
        recorder.setFailing(1)
        async let forced = cache.value(for: 1, forceUpdate: true)
        await eventually("forced load") { recorder.waiting(1) == 1 }
        #expect(try await cache.value(for: 1) == "1#1")  // fresh value served meanwhile
        recorder.open(1)
        do { _ = try await forced; Issue.record("succeeded") } catch { #expect(error as? KeyedTestError == KeyedTestError(key: 1, attempt: 2)) }
        #expect(cache.cachedValue(for: 1) == "1#1")
    }

    @Test func aCancelledCallerLeavesWithCancellationErrorWithoutCancellingTheLoad() async throws {
        let recorder = KeyedLoadRecorder(gated: [1])
        let cache = Self.make(recorder)
        let leaving = Task { try await cache.value(for: 1) }
        await eventually("load waiting") { recorder.waiting(1) == 1 }
        async let staying = cache.value(for: 1)
        await eventually("merged") { cache.counters.merges == 1 }
        leaving.cancel()
        await #expect(throws: CancellationError.self) { try await leaving.boundedValue() }
        #expect(cache.counters.callerCancellations == 1)
        recorder.open(1)
        #expect(try await staying == "1#1")
        #expect(cache.cachedValue(for: 1) == "1#1")  // the load went on and was cached
    }

    @Test func aCallerCancelledBeforeItArrivesLeavesAtOnceWithoutALoad() async throws {
        let recorder = KeyedLoadRecorder()
        let cache = Self.make(recorder)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await cache.value(for: 1)
        }
        await #expect(throws: CancellationError.self) { try await task.boundedValue() }
        #expect(recorder.started(1) == 0)
        #expect(cache.count == 0)
    }

    // MARK: Keys are independent

    @Test func aSlowOrFailingKeyNeverDelaysAnother() async throws {
        let clock = ManualClock()
        let recorder = KeyedLoadRecorder(gated: [1])
        recorder.setFailing(2)
        let cache = Self.make(recorder, retry: .count(count: 1, intervalProxy: .fixed(.seconds(60))), clock: clock)
        async let slow = cache.value(for: 1)
        await eventually("slow load") { recorder.waiting(1) == 1 }
        async let failing = cache.value(for: 2)  // fails, then waits 60 s to retry
        await clock.waitForSleepers(count: 1)
        #expect(try await cache.value(for: 3) == "3#1")
        #expect(try await cache.value(for: 4) == "4#1")
        clock.advance(by: .seconds(60))
        do { _ = try await failing; Issue.record("succeeded") } catch { #expect(error as? KeyedTestError == KeyedTestError(key: 2, attempt: 2)) }
        recorder.open(1)
        #expect(try await slow == "1#1")
    }

    // MARK: Bounds

    @Test func neverMoreThanMaximumEntriesAndAnUnreadValueGoesBeforeARead() async throws {
        let recorder = KeyedLoadRecorder()
        let cache = Self.make(recorder, maximumEntries: 3)
        for key in 1...3 { _ = try await cache.value(for: key) }
        _ = try await cache.value(for: 1)  // 1 is read; 2 is the oldest unread value
        _ = try await cache.value(for: 4)
        #expect(cache.count == 3)
        #expect(cache.cachedValue(for: 2) == nil)
        #expect(cache.cachedValue(for: 1) == "1#1")
        #expect(cache.cachedValue(for: 3) == "3#1")
        #expect(cache.cachedValue(for: 4) == "4#1")
        #expect(cache.counters.evictions == 1)
        for key in 5...20 {
            _ = try await cache.value(for: key)
            #expect(cache.count <= 3)
        }
        #expect(cache.counters.evictions == 17)
    }

    @Test func aKeyWhoseLoadIsInFlightIsNotEvictedAndTheBoundHoldsAgainWhenLoadsFinish() async throws {
        let recorder = KeyedLoadRecorder(gated: [1, 2, 3])
        let cache = Self.make(recorder, maximumEntries: 2)
        async let a = cache.value(for: 1)
        async let b = cache.value(for: 2)
        async let c = cache.value(for: 3)
        await eventually("three loads") { recorder.totalStarted == 3 }
        #expect(cache.count == 3)  // above the bound while loads are in flight
        #expect(cache.counters.evictions == 0)
        recorder.open(1)
        #expect(try await a == "1#1")
        // 1's result arrived while every other entry is in flight: it is kept.
        #expect(cache.count == 3)
        #expect(cache.cachedValue(for: 1) == "1#1")
        recorder.open(2)
        #expect(try await b == "2#1")
        // The bound is restored at the next completion: the oldest unread value goes.
        #expect(cache.count == 2)
        #expect(cache.cachedValue(for: 1) == nil)
        recorder.open(3)
        #expect(try await c == "3#1")
        #expect(cache.count == 2)
        #expect(cache.cachedValue(for: 2) == "2#1")
        #expect(cache.cachedValue(for: 3) == "3#1")
    }

    // MARK: Shards

    @Test func aShardedCacheHoldsMaximumEntriesKeysBeforeItEvicts() async throws {
        let cache = KeyedMonoTask<Int, Int>(maximumEntries: 4_096, resultExpireDuration: nil) { $0 }
        #expect(cache.inspect { _ in () }.count == 32)
        let values = await cache.values(for: 0..<4_096)
        #expect(values.count == 4_096)
        #expect(cache.count == 4_096 && cache.counters.evictions == 0, "the bound is the cache's, not a shard's")
        #expect(try await cache.value(for: 4_096) == 4_096)
        #expect(cache.count == 4_096 && cache.counters.evictions == 1)
        #expect(cache.inspect(\.count).reduce(0, +) == 4_096)
    }

    @Test func aFullCacheMakesRoomInAnotherShardWhenTheKeysShardHasNothingToEvict() async throws {
        let gate = TestGate()
        let cache = KeyedMonoTask<Int, Int>(maximumEntries: 256, resultExpireDuration: nil) { key in
            if key < 0 { await gate.wait() }
            return key
        }
        #expect(cache.inspect { _ in () }.count == 2)
        func shard(_ key: Int) -> Int { KeyedMonoTask<Int, Int>.shardIndex(hashValue: key.hashValue, mask: 1) }
        // Fill the cache with keys of one shard; then a key of the other shard, whose shard is empty.
        let full = (0...).lazy.filter { shard($0) == 1 }.prefix(256)
        _ = await cache.values(for: Array(full))
        #expect(cache.count == 256 && cache.inspect(\.count) == [0, 256])
        let other = (1...).lazy.map { -$0 }.first { shard($0) == 0 }!
        async let loaded = cache.value(for: other)
        await eventually("its load started") { cache.count == 257 }  // nothing to evict in its shard
        gate.open()
        #expect(try await loaded == other)
        #expect(cache.count == 256, "room made in the other shard when the load finished")
        #expect(cache.inspect(\.count) == [1, 255])
        #expect(cache.cachedValue(for: other) == other && cache.counters.evictions == 1)
    }

    // MARK: Cost bound

    @Test func theTotalCostOfCachedValuesStaysWithinMaximumCostUnreadValuesFirst() async throws {
        let recorder = KeyedLoadRecorder()
        let costed = LockedState<[Int]>([])
        let cache = Cache(
            maximumEntries: 100, maximumCost: 10, resultExpireDuration: .seconds(60), clock: ManualClock(),
            cost: { key, _ in
                costed.withLock { $0.append(key) }
                return key  // the key is the cost
            }
        ) { try await recorder.load($0) }
        _ = try await cache.value(for: 3)
        _ = try await cache.value(for: 4)
        _ = try await cache.value(for: 5)  // 12 > 10: the oldest unread value (3) goes
        #expect(cache.cachedValue(for: 3) == nil)
        #expect(cache.count == 2)
        _ = try await cache.value(for: 4)  // 4 is read, 5 is not
        _ = try await cache.value(for: 2)  // 11 > 10: 5 goes
        #expect(cache.cachedValue(for: 5) == nil)
        #expect(cache.cachedValue(for: 4) == "4#1" && cache.cachedValue(for: 2) == "2#1")
        #expect(cache.counters.evictions == 2)
        #expect(costed.withLock { $0 } == [3, 4, 5, 2])  // once per successful load, not per hit
        recorder.setFailing(1)
        _ = try? await cache.value(for: 1)
        #expect(costed.withLock { $0 }.count == 4)  // never for a failure
    }

    @Test func aValueCostlierThanTheWholeBoundIsDeliveredButNotCached() async throws {
        let recorder = KeyedLoadRecorder()
        let cache = Cache(
            maximumEntries: 100, maximumCost: 10, resultExpireDuration: .seconds(60), clock: ManualClock(),
            cost: { key, _ in key }
        ) { try await recorder.load($0) }
        _ = try await cache.value(for: 2)
        #expect(try await cache.value(for: 20) == "20#1")
        #expect(cache.cachedValue(for: 20) == nil)
        #expect(cache.cachedValue(for: 2) == "2#1")
        #expect(cache.count == 1)
        #expect(try await cache.value(for: 20) == "20#2")
    }

    // MARK: Stale while revalidate

    @Test func withinTheStaleWindowTheOldValueIsServedAtOnceAndOneRefreshRuns() async throws {
        let clock = ManualClock()
        let recorder = KeyedLoadRecorder()
        let cache = Self.make(recorder, ttl: .seconds(10), stale: .seconds(5), clock: clock)
        #expect(try await cache.value(for: 1) == "1#1")
        recorder.close(1)
        clock.advance(by: .seconds(11))
        for _ in 0..<10 {
            #expect(try await cache.value(for: 1) == "1#1")  // stale, at once
        }
        await eventually("refresh started") { recorder.waiting(1) == 1 }
        #expect(recorder.started(1) == 2)  // exactly one refresh
        #expect(cache.counters.staleHits == 10)
        recorder.open(1)
        await eventually("refreshed") { cache.cachedValue(for: 1) == "1#2" }
        #expect(try await cache.value(for: 1) == "1#2")
        #expect(recorder.started(1) == 2)
    }

    @Test func aFailedRefreshKeepsTheOldValueUntilTheWindowEnds() async throws {
        let clock = ManualClock()
        let recorder = KeyedLoadRecorder()
        let cache = Self.make(recorder, ttl: .seconds(10), stale: .seconds(5), clock: clock)
        #expect(try await cache.value(for: 1) == "1#1")
        recorder.setFailing(1)
        clock.advance(by: .seconds(11))
        #expect(try await cache.value(for: 1) == "1#1")
        await eventually("refresh failed") { cache.counters.failures == 1 }
        #expect(cache.cachedValue(for: 1) == "1#1")
        #expect(try await cache.value(for: 1) == "1#1")  // still served; a new refresh starts
        await eventually("second refresh failed") { cache.counters.failures == 2 }
        clock.advance(by: .seconds(4))  // the window ends at 15 s
        #expect(cache.cachedValue(for: 1) == nil)
        await #expect(throws: KeyedTestError.self) { try await cache.value(for: 1) }
    }

    @Test func afterTheStaleWindowCallersWaitForTheRefreshInFlight() async throws {
        let clock = ManualClock()
        let recorder = KeyedLoadRecorder()
        let cache = Self.make(recorder, ttl: .seconds(10), stale: .seconds(5), clock: clock)
        #expect(try await cache.value(for: 1) == "1#1")
        recorder.close(1)
        clock.advance(by: .seconds(11))
        #expect(try await cache.value(for: 1) == "1#1")
        await eventually("refresh started") { recorder.waiting(1) == 1 }
        clock.advance(by: .seconds(5))
        async let waiting = cache.value(for: 1)
        await eventually("joined the refresh") { cache.counters.merges == 1 }
        recorder.open(1)
        #expect(try await waiting == "1#2")
        #expect(recorder.started(1) == 2)
    }

    // MARK: Invalidation

    @Test func invalidateDuringALoadDeliversToItsCallersButDoesNotCache() async throws {
        let recorder = KeyedLoadRecorder(gated: [1])
        let cache = Self.make(recorder)
        async let a = cache.value(for: 1)
        await eventually("load waiting") { recorder.waiting(1) == 1 }
        cache.invalidate(1)
        #expect(cache.count == 0)
        recorder.open(1)
        #expect(try await a == "1#1")
        #expect(cache.cachedValue(for: 1) == nil)
        #expect(cache.count == 0)
        #expect(try await cache.value(for: 1) == "1#2")
    }

    @Test func afterInvalidateNewCallersStartANewGenerationAndTheOldResultGoesToItsOwnCallers() async throws {
        let recorder = KeyedLoadRecorder(gated: [1])
        let cache = Self.make(recorder)
        let old = Task { try await cache.value(for: 1) }
        await eventually("old load") { recorder.waiting(1) == 1 }
        cache.invalidate(1)
        let new = Task { try await cache.value(for: 1) }
        await eventually("new load") { recorder.waiting(1) == 2 }
        #expect(cache.counters.loads == 2)
        // Cancelling a caller of the detached load still works.
        let leaving = Task { try await cache.value(for: 1) }  // joins the new load
        await eventually("joined") { cache.counters.merges == 1 }
        leaving.cancel()
        await #expect(throws: CancellationError.self) { try await leaving.boundedValue() }
        recorder.open(1)
        let oldValue = try await old.boundedValue()
        let newValue = try await new.boundedValue()
        #expect(Set([oldValue, newValue]) == ["1#1", "1#2"])
        // Only the new generation is cached.
        #expect(cache.cachedValue(for: 1) == newValue)
    }

    @Test func aCallerOfAnInvalidatedLoadCanStillLeave() async throws {
        let recorder = KeyedLoadRecorder(gated: [1])
        let cache = Self.make(recorder)
        let leaving = Task { try await cache.value(for: 1) }
        await eventually("load waiting") { recorder.waiting(1) == 1 }
        cache.invalidate(1)
        leaving.cancel()
        await #expect(throws: CancellationError.self) { try await leaving.boundedValue() }
        #expect(cache.counters.callerCancellations == 1)
        recorder.open(1)
        await eventually("load over") { cache.inspect(\.loadsInFlight).reduce(0, +) == 0 }
        #expect(cache.count == 0)
    }

    @Test func forcedCallersWaitingForAFollowUpGetANewLoadOnInvalidate() async throws {
        let recorder = KeyedLoadRecorder(gated: [1])
        let cache = Self.make(recorder)
        async let first = cache.value(for: 1)
        await eventually("first load") { recorder.waiting(1) == 1 }
        async let forced = cache.value(for: 1, forceUpdate: true)
        await eventually("forced queued") { cache.counters.merges == 1 }
        cache.invalidate(1)
        await eventually("new load at once") { recorder.waiting(1) == 2 }
        recorder.open(1)
        let (f, g) = try await (first, forced)
        #expect(f != g)
        #expect(cache.cachedValue(for: 1) == g)
    }

    @Test func invalidateAllRemovesEveryEntry() async throws {
        let recorder = KeyedLoadRecorder(gated: [9])
        let cache = Self.make(recorder)
        for key in 1...5 { _ = try await cache.value(for: key) }
        async let loading = cache.value(for: 9)
        await eventually("load waiting") { recorder.waiting(9) == 1 }
        #expect(cache.count == 6)
        cache.invalidateAll()
        #expect(cache.count == 0)
        #expect(cache.counters.invalidations == 6)
        recorder.open(9)
        #expect(try await loading == "9#1")
        #expect(cache.count == 0)
        #expect(try await cache.value(for: 1) == "1#2")
    }

    // MARK: values(for:)

    @Test func valuesJoinsLoadsInFlightAndLoadsTheMissingKeysInParallel() async throws {
        let recorder = KeyedLoadRecorder(gated: [1, 2, 3])
        let cache = Self.make(recorder)
        recorder.open(4)
        _ = try await cache.value(for: 4)  // cached
        async let inFlight = cache.value(for: 1)
        await eventually("load of 1") { recorder.waiting(1) == 1 }
        recorder.setFailing(3)
        async let all = cache.values(for: [1, 2, 3, 4, 2])
        // 2 and 3 load in parallel: both wait at their gates at the same time.
        await eventually("2 and 3 loading together") { recorder.waiting(2) == 1 && recorder.waiting(3) == 1 }
        for key in 1...3 { recorder.open(key) }
        let results = await all
        #expect(try await inFlight == "1#1")
        #expect(results.count == 4)
        #expect(try results[1]?.get() == "1#1")
        #expect(try results[2]?.get() == "2#1")
        #expect(throws: KeyedTestError(key: 3, attempt: 1)) { try results[3]?.get() }
        #expect(try results[4]?.get() == "4#1")
        #expect(recorder.started(1) == 1 && recorder.started(2) == 1 && recorder.started(3) == 1)
    }

    @Test func valuesOfACancelledCallerFailWithCancellationErrorAndTheLoadsGoOn() async throws {
        let recorder = KeyedLoadRecorder(gated: [1, 2])
        let cache = Self.make(recorder)
        let task = Task { await cache.values(for: [1, 2]) }
        await eventually("loads") { recorder.waiting(1) == 1 && recorder.waiting(2) == 1 }
        task.cancel()
        let results = try await task.boundedValue()
        #expect(throws: CancellationError.self) { try results[1]?.get() }
        #expect(throws: CancellationError.self) { try results[2]?.get() }
        recorder.open(1)
        recorder.open(2)
        await eventually("cached") { cache.cachedValue(for: 1) != nil && cache.cachedValue(for: 2) != nil }
    }

    // MARK: Callback form, cachedValue

    @Test func theCallbackFormDeliversExactlyOnceForMissesAndHits() async throws {
        let recorder = KeyedLoadRecorder(gated: [1])
        let cache = Self.make(recorder)
        let received = LockedState<[String]>([])
        for _ in 0..<3 {
            cache.value(for: 1) { result in received.withLock { $0.append((try? result.get()) ?? "error") } }
        }
        await eventually("merged") { cache.counters.merges == 2 }
        recorder.open(1)
        await eventually("delivered") { received.withLock { $0.count } == 3 }
        cache.value(for: 1) { result in received.withLock { $0.append((try? result.get()) ?? "error") } }
        #expect(received.withLock { $0 } == ["1#1", "1#1", "1#1", "1#1"])  // the hit was delivered inline
        #expect(recorder.started(1) == 1)
    }

    @Test func cachedValueNeverLoadsNorWaits() async throws {
        let recorder = KeyedLoadRecorder(gated: [1])
        let cache = Self.make(recorder)
        #expect(cache.cachedValue(for: 1) == nil)
        #expect(recorder.started(1) == 0)
        async let a = cache.value(for: 1)
        await eventually("loading") { recorder.waiting(1) == 1 }
        #expect(cache.cachedValue(for: 1) == nil)
        recorder.open(1)
        _ = try await a
        #expect(cache.cachedValue(for: 1) == "1#1")
        #expect(cache.counters.hits == 0)
    }

    @Test func aCacheHitCompletesWithoutSuspendingTheCaller() async throws {
        let cache = KeyedMonoTask<Int, Int>(maximumEntries: 10, resultExpireDuration: .seconds(60), clock: ManualClock()) {
            $0 * 2
        }
        _ = try await cache.value(for: 21)
        let probe = KeyedProbe()
        let (jobs, values) = await probe.jobsDuring(hits: 100, key: 21, on: cache)
        #expect(values == Array(repeating: 42, count: 100))
        #expect(jobs == 0)
    }

    // MARK: Configuration

    @Test func invalidConfigurationIsRejectedWithTheParameterNamed() async {
        await #expect(processExitsWith: .failure) {
            _ = KeyedMonoTask<Int, Int>(maximumEntries: 0) { $0 }
        }
        await #expect(processExitsWith: .failure) {
            _ = KeyedMonoTask<Int, Int>(maximumEntries: 1, resultExpireDuration: .seconds(-1)) { $0 }
        }
        await #expect(processExitsWith: .failure) {
            _ = KeyedMonoTask<Int, Int>(maximumEntries: 1, staleWhileRevalidate: .seconds(-1)) { $0 }
        }
        await #expect(processExitsWith: .failure) {
            _ = KeyedMonoTask<Int, Int>(maximumEntries: 1, maximumCost: -1, cost: { _, _ in 1 }) { $0 }
        }
    }
}

/// An actor on a ``MonoCountingExecutor``: measures whether awaiting a hit suspended it.
actor KeyedProbe {
    let executor = MonoCountingExecutor()

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    func jobsDuring(hits count: Int, key: Int, on cache: KeyedMonoTask<Int, Int>) async -> (jobs: Int, values: [Int]) {
        let before = executor.enqueued.load(ordering: .relaxed)
        var values: [Int] = []
        for _ in 0..<count {
            if let value = try? await cache.value(for: key) { values.append(value) }
        }
        return (executor.enqueued.load(ordering: .relaxed) - before, values)
    }
}
