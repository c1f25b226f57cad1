import Foundation
import Testing
import TaskKitTestSupport
import TaskKitTesting
@testable import TaskKit

/// Records the calls of a batch loader of a `KeyedMonoTask<Int, String>`: each call's keys, how
/// many loads of each key run at once (and the most ever seen), and holds every call at a gate
/// until the test opens it (when made `gated`). The value of a key is `"<key>#<loads of it>"`.
final class KeyedBatchRecorder: Sendable {
    private struct State {
        var calls: [[Int]] = []
        var loads: [Int: Int] = [:]
        var active: [Int: Int] = [:]
        var maximumOverlap = 0
        /// Calls that throw (the next ones).
        var failingCalls = 0
        /// Keys left out of the result.
        var omitted: Set<Int> = []
        /// Values returned besides the keys asked for.
        var extra: [Int: String] = [:]
    }

    struct Failure: Error, Equatable {
        let call: Int
    }

    private let state = LockedState(State())
    /// Every call waits here, when made gated.
    let gate: TestGate?

    init(gated: Bool = false) {
        gate = gated ? TestGate() : nil
    }

    /// The batch loader.
    @Sendable func load(_ keys: [Int]) async throws -> [Int: String] {
        let (call, fails) = state.withLock { state in
            state.calls.append(keys)
            for key in keys {
                state.active[key, default: 0] += 1
                state.maximumOverlap = max(state.maximumOverlap, state.active[key]!)
            }
            let fails = state.failingCalls > 0
            if fails { state.failingCalls -= 1 }
            return (state.calls.count, fails)
        }
        if let gate { await gate.wait() }
        return try state.withLock { state in
            for key in keys { state.active[key]! -= 1 }
            if fails { throw Failure(call: call) }
            var values = state.extra
            for key in keys where !state.omitted.contains(key) {
                state.loads[key, default: 0] += 1
                values[key] = "\(key)#\(state.loads[key]!)"
            }
            return values
        }
    }

    /// The keys of each call so far, in call order.
    var calls: [[Int]] { state.withLock { $0.calls } }
    /// The most loads of one key ever in flight at once.
    var maximumOverlap: Int { state.withLock { $0.maximumOverlap } }

    /// The next `count` calls throw.
    func failNext(_ count: Int) { state.withLock { $0.failingCalls = count } }
    /// Calls leave `keys` out of their results.
    func omit(_ keys: Set<Int>) { state.withLock { $0.omitted = keys } }
    /// Calls return `values` besides the keys asked for.
    func returnExtra(_ values: [Int: String]) { state.withLock { $0.extra = values } }
}

/// `KeyedMonoTask` with a batch loader (issue 36): every rule of the issue, on a `ManualClock`.
@Suite(.scaledTimeLimit(minutes: 1))
struct KeyedMonoTaskBatchTests {
    typealias Cache = KeyedMonoTask<Int, String>

    static func make(
        _ recorder: KeyedBatchRecorder, maximumEntries: Int = 1_000, ttl: Duration = .seconds(10),
        stale: Duration = .zero, retry: RetryCount = .never, batchSize: Int = 100, window: Duration = .zero,
        clock: ManualClock = ManualClock()
    ) -> Cache {
        Cache(
            maximumEntries: maximumEntries, resultExpireDuration: ttl, staleWhileRevalidate: stale, retry: retry,
            maximumBatchSize: batchSize, batchWindow: window, clock: clock, batchLoad: recorder.load
        )
    }

    /// Calls `value(for:)` for each key concurrently, returns the results by key.
    static func concurrentValues(_ cache: Cache, _ keys: [Int]) async -> [Int: Result<String, any Error>] {
        await withTaskGroup(of: (Int, Result<String, any Error>).self) { group in
            for key in keys {
                group.addTask {
                    do {
                        return (key, .success(try await cache.value(for: key)))
                    } catch {
                        return (key, .failure(error))
                    }
                }
            }
            return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
    }

    // MARK: Keys asked for together go in one call

    @Test func keysAskedForWithinTheWindowGoInOneCall() async throws {
        let recorder = KeyedBatchRecorder()
        let clock = ManualClock()
        let cache = Self.make(recorder, window: .milliseconds(5), clock: clock)
        async let results = Self.concurrentValues(cache, Array(0..<50))
        await eventually("50 keys registered") { cache.counters.misses == 50 }
        await clock.waitForSleepers(count: 1)  // the batch's window
        #expect(recorder.calls.isEmpty)
        clock.advance(by: .milliseconds(5))
        let values = await results
        #expect(recorder.calls.count == 1)
        #expect(recorder.calls.first.map(Set.init) == Set(0..<50))
        for key in 0..<50 { #expect(try values[key]?.get() == "\(key)#1") }
        #expect(cache.counters.batches == 1)
        #expect(cache.counters.batchedKeys == 50)
    }

    @Test func withoutAWindowConcurrentCallersShareABatch() async throws {
        let recorder = KeyedBatchRecorder()
        let cache = Self.make(recorder)
        let values = await Self.concurrentValues(cache, Array(0..<200))
        for key in 0..<200 { #expect(try values[key]?.get() == "\(key)#1") }
        // Each key once, in far fewer calls than keys (the dispatch waits while keys arrive).
        #expect(recorder.calls.flatMap { $0 }.sorted() == Array(0..<200))
        #expect(recorder.calls.count < 200)
    }

    @Test func aKeyArrivingWithinTheQuietPeriodJoinsTheBatch() async throws {
        // The quiet period is real time: a key asked for 50 ms after the first, as by a caller
        // whose thread the system preempted, still joins its batch when the period is longer.
        let recorder = KeyedBatchRecorder()
        let cache = Cache(
            maximumEntries: 100, resultExpireDuration: .seconds(10), maximumBatchSize: 100,
            batchQuietPeriod: .milliseconds(500), clock: ManualClock(), batchLoad: recorder.load
        )
        let results = LockedState<[Int: String]>([:])
        cache.value(for: 1) { result in results.withLock { $0[1] = try? result.get() } }
        try await Task.sleep(for: .milliseconds(50))
        cache.value(for: 2) { result in results.withLock { $0[2] = try? result.get() } }
        await eventually("both answered") { results.withLock { $0.count } == 2 }
        #expect(recorder.calls.map(Set.init) == [[1, 2]])
        // Without one, the first key's batch goes once the asking tasks have yielded.
        let alone = KeyedBatchRecorder()
        let eager = Cache(
            maximumEntries: 100, resultExpireDuration: .seconds(10), maximumBatchSize: 100, batchQuietPeriod: .zero,
            clock: ManualClock(), batchLoad: alone.load
        )
        eager.value(for: 1) { _ in }
        await eventually("the first batch went") { alone.calls.count == 1 }
        _ = try await eager.value(for: 2)
        #expect(alone.calls == [[1], [2]])
    }

    @Test func valuesForMakesOneCallForAllMissingKeys() async throws {
        let recorder = KeyedBatchRecorder()
        let cache = Self.make(recorder)
        _ = try await cache.value(for: 7)
        let results = await cache.values(for: Array(0..<40) + [3, 3])
        #expect(results.count == 40)
        for key in 0..<40 { #expect(try results[key]?.get() == "\(key)#1") }
        #expect(recorder.calls.count == 2)
        #expect(recorder.calls.last.map(Set.init) == Set(0..<40).subtracting([7]))
        #expect(cache.counters.hits == 1)
    }

    @Test func batchesAreSplitAtTheMaximumSize() async throws {
        let recorder = KeyedBatchRecorder()
        let cache = Self.make(recorder, batchSize: 100)
        let results = await cache.values(for: Array(0..<250))
        for key in 0..<250 { #expect(try results[key]?.get() == "\(key)#1") }
        #expect(recorder.calls.map(\.count).sorted() == [50, 100, 100])
        #expect(recorder.calls.flatMap { $0 }.sorted() == Array(0..<250))
        #expect(cache.counters.batches == 3)
        #expect(cache.counters.batchedKeys == 250)
    }

    @Test func aKeyCachedOrLoadingIsNeverAskedForAgain() async throws {
        let recorder = KeyedBatchRecorder(gated: true)
        let cache = Self.make(recorder)
        async let first = Self.concurrentValues(cache, [1, 2])
        await eventually("the first batch runs") { recorder.calls.count == 1 }
        // 1 and 2 are loading: joiners wait for that batch; only 3 makes a new one.
        async let second = Self.concurrentValues(cache, [1, 2, 3])
        await eventually("the second batch runs") { recorder.calls.count == 2 }
        #expect(recorder.calls[1] == [3])
        #expect(cache.counters.merges == 2)
        recorder.gate?.open()
        let (a, b) = await (first, second)
        #expect(try a[1]?.get() == "1#1" && a[2]?.get() == "2#1")
        #expect(try b[1]?.get() == "1#1" && b[2]?.get() == "2#1" && b[3]?.get() == "3#1")
        // All cached now: no call.
        let cached = await cache.values(for: [1, 2, 3])
        #expect(try cached[3]?.get() == "3#1")
        #expect(recorder.calls.count == 2)
    }

    // MARK: Results are per key

    @Test func aKeyLeftOutFailsWithKeyNotLoadedAndIsNotCached() async throws {
        let recorder = KeyedBatchRecorder()
        let cache = Self.make(recorder)
        recorder.omit([2])
        let results = await cache.values(for: [1, 2])
        #expect(try results[1]?.get() == "1#1")
        let error = try #require(results[2].flatMap { result -> KeyedMonoTaskKeyNotLoaded? in
            if case .failure(let error) = result { return error as? KeyedMonoTaskKeyNotLoaded }
            return nil
        })
        #expect(error.key as? Int == 2)
        #expect(error.description.contains("2"))
        recorder.omit([])
        #expect(try await cache.value(for: 2) == "2#1")  // loaded again
        #expect(recorder.calls == [[1, 2], [2]])
    }

    @Test func extraKeysAreCached() async throws {
        let recorder = KeyedBatchRecorder()
        let cache = Self.make(recorder)
        recorder.returnExtra([99: "99#extra"])
        #expect(try await cache.value(for: 1) == "1#1")
        #expect(cache.cachedValue(for: 99) == "99#extra")
        #expect(try await cache.value(for: 99) == "99#extra")
        #expect(recorder.calls == [[1]])
    }

    @Test func aThrownErrorFailsItsBatchOnlyAndIsNotCached() async throws {
        let recorder = KeyedBatchRecorder()
        let cache = Self.make(recorder, batchSize: 2)
        recorder.failNext(1)
        let results = await cache.values(for: [1, 2, 3, 4])
        // Two batches of two: the first call threw, the second did not.
        let failed = results.filter { (try? $0.value.get()) == nil }.keys.sorted()
        #expect(failed == recorder.calls[0].sorted())
        for key in failed {
            #expect(throws: KeyedBatchRecorder.Failure(call: 1)) { try results[key]!.get() }
        }
        #expect(failed.count == 2)
        #expect(cache.counters.failures == 2)
        // Not cached: loaded again.
        let again = await cache.values(for: failed)
        for key in failed { #expect(try again[key]?.get() == "\(key)#1") }
        #expect(recorder.calls.count == 3)
    }

    @Test func retryAppliesToTheWholeBatch() async throws {
        let recorder = KeyedBatchRecorder()
        let clock = ManualClock()
        let cache = Self.make(recorder, retry: .count(count: 2, intervalProxy: .fixed(.seconds(1))), clock: clock)
        recorder.failNext(1)
        async let results = cache.values(for: [1, 2, 3])
        await clock.waitForSleepers(count: 1)  // the backoff
        #expect(recorder.calls.count == 1)
        clock.advance(by: .seconds(1))
        let values = await results
        for key in [1, 2, 3] { #expect(try values[key]?.get() == "\(key)#1") }
        #expect(recorder.calls.map(Set.init) == [[1, 2, 3], [1, 2, 3]])
        #expect(cache.counters.retries == 1)
        #expect(cache.counters.batches == 1)
        #expect(cache.counters.failures == 0)
    }

    // MARK: Expiry, bounds, stale-while-revalidate, invalidation

    @Test func anExpiredKeyIsLoadedAgainInABatch() async throws {
        let recorder = KeyedBatchRecorder()
        let clock = ManualClock()
        let cache = Self.make(recorder, ttl: .seconds(10), clock: clock)
        _ = await cache.values(for: [1, 2])
        clock.advance(by: .seconds(9))
        _ = await cache.values(for: [1, 2])
        #expect(recorder.calls.count == 1)
        clock.advance(by: .seconds(1))
        let results = await cache.values(for: [1, 2])
        #expect(try results[1]?.get() == "1#2" && results[2]?.get() == "2#2")
        #expect(recorder.calls.map(Set.init) == [[1, 2], [1, 2]])
    }

    @Test func staleKeysAreServedAndRefreshedInOneBatch() async throws {
        let recorder = KeyedBatchRecorder()
        let clock = ManualClock()
        let cache = Self.make(recorder, ttl: .seconds(10), stale: .seconds(10), clock: clock)
        _ = await cache.values(for: [1, 2, 3])
        clock.advance(by: .seconds(15))
        let stale = await cache.values(for: [1, 2, 3])
        for key in [1, 2, 3] { #expect(try stale[key]?.get() == "\(key)#1") }
        await eventually("the refresh batch ends") { cache.cachedValue(for: 3) == "3#2" }
        #expect(recorder.calls.map(Set.init) == [[1, 2, 3], [1, 2, 3]])
        #expect(cache.counters.staleHits == 3)
        #expect(try await cache.value(for: 1) == "1#2")
    }

    @Test func theEntryBoundHoldsAfterBatches() async throws {
        let recorder = KeyedBatchRecorder()
        let cache = Self.make(recorder, maximumEntries: 10)
        _ = await cache.values(for: Array(0..<10))
        recorder.returnExtra([100: "x", 101: "y"])
        _ = await cache.values(for: Array(10..<15))
        #expect(cache.count <= 10)
        #expect(cache.counters.evictions >= 7)
    }

    @Test func aKeyInvalidatedDuringItsBatchIsDeliveredButNotCached() async throws {
        let recorder = KeyedBatchRecorder(gated: true)
        let cache = Self.make(recorder)
        async let first = Self.concurrentValues(cache, [1, 2])
        await eventually("the batch runs") { recorder.calls.count == 1 }
        cache.invalidate(1)
        recorder.gate?.open()
        let values = await first
        #expect(try values[1]?.get() == "1#1" && values[2]?.get() == "2#1")
        #expect(cache.cachedValue(for: 1) == nil)
        #expect(cache.cachedValue(for: 2) == "2#1")
    }

    /// Invalidated while its load waits for the batch, then asked for again: the key has two
    /// loads in the batch, is sent once, and both callers get its value.
    @Test func aKeyInvalidatedWhileWaitingForItsBatchIsSentOnce() async throws {
        let recorder = KeyedBatchRecorder()
        let clock = ManualClock()
        let cache = Self.make(recorder, window: .milliseconds(5), clock: clock)
        async let first = cache.value(for: 1)
        await eventually("the first caller waits") { cache.counters.misses == 1 }
        cache.invalidate(1)
        async let second = cache.value(for: 1)
        await eventually("the second caller waits") { cache.counters.misses == 2 }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .milliseconds(5))
        let (a, b) = try await (first, second)
        #expect(a == "1#1" && b == "1#1")
        #expect(recorder.calls == [[1]])
        #expect(cache.cachedValue(for: 1) == "1#1")
    }

    // MARK: Callers

    @Test func aCancelledCallerLeavesAndTheBatchGoesOnForTheOthers() async throws {
        let recorder = KeyedBatchRecorder(gated: true)
        let cache = Self.make(recorder)
        let leaving = Task { try await cache.value(for: 1) }
        async let staying = Self.concurrentValues(cache, [1, 2])
        await eventually("three callers wait") { cache.counters.misses + cache.counters.merges == 3 }
        await eventually("the batch runs") { !recorder.calls.isEmpty }
        leaving.cancel()
        await #expect(throws: CancellationError.self) { try await leaving.value }
        recorder.gate?.open()
        let values = await staying
        #expect(try values[1]?.get() == "1#1" && values[2]?.get() == "2#1")
        #expect(cache.cachedValue(for: 1) == "1#1")
        #expect(cache.counters.callerCancellations == 1)
    }

    @Test func aCancelledValuesForCallGetsCancellationForTheKeysStillMissing() async {
        let gated = KeyedBatchRecorder(gated: true)
        let other = Self.make(gated)
        let call = Task { await other.values(for: [1, 2]) }
        await eventually("the batch runs") { !gated.calls.isEmpty }
        call.cancel()
        let results = await call.value
        for key in [1, 2] {
            #expect(throws: CancellationError.self) { try results[key]!.get() }
        }
        gated.gate?.open()
        await eventually("the batch's values are cached") { other.cachedValue(for: 2) == "2#1" }
    }

    /// A batch runs detached: a caller's task-local value does not reach the loader.
    @Test func aCallersTaskLocalsDoNotReachTheBatch() async throws {
        let seen = LockedState<[String?]>([])
        let cache = Cache(maximumEntries: 10, maximumBatchSize: 10) { keys in
            seen.withLock { $0.append(BatchTestContext.caller) }
            return Dictionary(uniqueKeysWithValues: keys.map { ($0, "\($0)") })
        }
        let value = try await BatchTestContext.$caller.withValue("alice") { try await cache.value(for: 1) }
        #expect(value == "1")
        #expect(seen.withLock { $0 } == [nil])
    }

    @Test func theCallbackFormIsBatchedToo() async throws {
        let recorder = KeyedBatchRecorder()
        let cache = Self.make(recorder)
        let arrived = TestGate()
        let results = LockedState<[Int: String]>([:])
        for key in 0..<3 {
            cache.value(for: key) { result in
                results.withLock { $0[key] = try? result.get() }
                _ = arrived.arrive()
            }
        }
        await arrived.waitForArrivals(3)
        #expect(results.withLock { $0 } == [0: "0#1", 1: "1#1", 2: "2#1"])
        #expect(recorder.calls.flatMap { $0 }.sorted() == [0, 1, 2])
    }

    // MARK: Configuration

    @Test func aBatchSizeBelowOneIsRefusedNamingTheParameter() async {
        await #expect(processExitsWith: .failure) {
            _ = KeyedMonoTask<Int, Int>(maximumEntries: 10, maximumBatchSize: 0) { _ in [:] }
        }
    }

    @Test func aCostBoundWithoutACostIsRefused() async {
        await #expect(processExitsWith: .failure) {
            _ = KeyedMonoTask<Int, Int>(maximumEntries: 10, maximumCost: 5, maximumBatchSize: 10) { _ in [:] }
        }
    }

    @Test func aCostBoundHoldsWithBatches() async throws {
        let cache = Cache(
            maximumEntries: 100, maximumCost: 10, resultExpireDuration: .seconds(60), maximumBatchSize: 50,
            clock: ManualClock(), cost: { _, _ in 3 }
        ) { keys in Dictionary(uniqueKeysWithValues: keys.map { ($0, "\($0)") }) }
        let results = await cache.values(for: Array(0..<8))
        #expect(results.count == 8)
        #expect(cache.count <= 3)
    }
}

enum BatchTestContext {
    @TaskLocal static var caller: String?
}

/// Many callers through every path of a batched cache at once: per key, never two loads in
/// flight (no invalidation here, which alone may start a second load while one runs).
@Suite(.scaledTimeLimit(minutes: 2))
struct KeyedMonoTaskBatchStressTests {
    @Test(arguments: [1, 7, 64])
    func perKeyNeverTwoLoadsInFlight(batchSize: Int) async throws {
        let recorder = KeyedBatchRecorder()
        let clock = ManualClock()
        let cache = KeyedMonoTask<Int, String>(
            maximumEntries: 48, resultExpireDuration: .seconds(2), staleWhileRevalidate: .seconds(2),
            maximumBatchSize: batchSize, clock: clock, batchLoad: recorder.load
        )
        var generator = SeededRandomNumberGenerator(seed: UInt64(batchSize))
        let plans: [(path: Int, keys: [Int], force: Bool)] = (0..<2_000).map { _ in
            let keys = (0..<Int.random(in: 1...5, using: &generator)).map { _ in Int.random(in: 0..<64, using: &generator) }
            return (Int.random(in: 0..<3, using: &generator), keys, Int.random(in: 0..<20, using: &generator) == 0)
        }
        await withTaskGroup(of: Void.self) { group in
            for (index, plan) in plans.enumerated() {
                if index % 200 == 0 { clock.advance(by: .seconds(1)) }
                group.addTask {
                    switch plan.path {
                    case 0:
                        let value = try? await cache.value(for: plan.keys[0], forceUpdate: plan.force)
                        #expect(value?.hasPrefix("\(plan.keys[0])#") == true)
                    case 1:
                        let results = await cache.values(for: plan.keys)
                        for key in plan.keys { #expect((try? results[key]?.get())?.hasPrefix("\(key)#") == true) }
                    default:
                        await withCheckedContinuation { continuation in
                            cache.value(for: plan.keys[0]) { result in
                                #expect((try? result.get())?.hasPrefix("\(plan.keys[0])#") == true)
                                continuation.resume()
                            }
                        }
                    }
                }
            }
        }
        #expect(recorder.maximumOverlap == 1)
        #expect(recorder.calls.allSatisfy { $0.count <= batchSize && Set($0).count == $0.count })
        #expect(cache.count <= 48)
    }
}
