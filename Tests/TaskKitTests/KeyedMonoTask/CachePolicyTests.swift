import Synchronization
import Testing
import TaskKitTestSupport
import TaskKitTesting
@testable import TaskKit

/// The cache policies of `KeyedMonoTask` and `MonoTask` on the real components, driven by a
/// `ManualClock`: the same policy, by the same name, in both.
@Suite(.scaledTimeLimit(minutes: 1))
struct CachePolicyTests {
    /// A token whose lifetime the server decides, as an OAuth token's `expires_in`.
    struct Token: Sendable, Equatable {
        var value: String
        var expiresIn: Duration
    }

    // MARK: Expiry from the value

    @Test func keyedMonoTaskKeepsEachValueForItsOwnLifetime() async throws {
        let clock = ManualClock()
        let loads = Mutex(0)
        let tokens = KeyedMonoTask<String, Token>(
            maximumEntries: 100,
            resultExpireDuration: .seconds(60),
            clock: clock,
            expiry: { _, token in token.expiresIn }
        ) { scope in
            let count = loads.withLock { $0 += 1; return $0 }
            return Token(value: "\(scope)-\(count)", expiresIn: scope == "short" ? .seconds(5) : .seconds(3600))
        }
        let short = try await tokens.value(for: "short")
        let long = try await tokens.value(for: "long")
        clock.advance(by: .seconds(4))
        #expect(try await tokens.value(for: "short") == short)  // within its own 5 s
        clock.advance(by: .seconds(1))
        #expect(tokens.cachedValue(for: "short") == nil)  // 5 s: expired, although the default is 60 s
        #expect(try await tokens.value(for: "short") != short)
        clock.advance(by: .seconds(120))  // past the default 60 s, within its own hour
        #expect(try await tokens.value(for: "long") == long)
        #expect(loads.withLock { $0 } == 3)
    }

    @Test func keyedMonoTaskWithABatchLoaderKeepsEachValueForItsOwnLifetime() async throws {
        let clock = ManualClock()
        let batches = Mutex(0)
        let cache = KeyedMonoTask<Int, Token>(
            maximumEntries: 100,
            maximumBatchSize: 10,
            clock: clock,
            expiry: { _, token in token.expiresIn }
        ) { keys in
            batches.withLock { $0 += 1 }
            // Even keys live 10 s; odd ones a negative time: delivered, not kept.
            return Dictionary(uniqueKeysWithValues: keys.map { key in
                (key, Token(value: "\(key)", expiresIn: key.isMultiple(of: 2) ? .seconds(10) : .seconds(-1)))
            })
        }
        let first = await cache.values(for: [1, 2])
        #expect(try first[2]?.get() == Token(value: "2", expiresIn: .seconds(10)))
        #expect(batches.withLock { $0 } == 1)
        clock.advance(by: .seconds(9))
        #expect(cache.cachedValue(for: 2) != nil)
        #expect(cache.cachedValue(for: 1) == nil)
        clock.advance(by: .seconds(1))
        #expect(cache.cachedValue(for: 2) == nil)
    }

    // MARK: Failures kept for a while (negative caching)

    struct NotFound: Error {}

    @Test func keyedMonoTaskAnswersAKeptNotFoundWithoutLoadingUntilItExpires() async throws {
        let clock = ManualClock()
        let loads = Mutex(0)
        let users = KeyedMonoTask<Int, String>(
            maximumEntries: 100,
            resultExpireDuration: .seconds(60),
            clock: clock,
            failureExpiry: { _, error in error is NotFound ? .seconds(30) : nil }
        ) { id in
            let count = loads.withLock { $0 += 1; return $0 }
            if id == 404 { throw NotFound() }
            if id == 1, count == 3 { throw CancellationError() }  // never kept
            return "user \(id)"
        }
        await #expect(throws: NotFound.self) { try await users.value(for: 404) }
        clock.advance(by: .seconds(29))
        await #expect(throws: NotFound.self) { try await users.value(for: 404) }  // kept: no load
        #expect(loads.withLock { $0 } == 1)
        #expect(users.counters.negativeHits == 1 && users.counters.hits == 0)
        clock.advance(by: .seconds(1))
        await #expect(throws: NotFound.self) { try await users.value(for: 404) }  // expired: loads
        #expect(loads.withLock { $0 } == 2)
        // A CancellationError from the loader is not kept: the next caller loads.
        await #expect(throws: CancellationError.self) { try await users.value(for: 1) }
        #expect(try await users.value(for: 1) == "user 1")
    }

    @Test func keyedMonoTaskWithABatchLoaderKeepsAKeyItDidNotReturn() async throws {
        let clock = ManualClock()
        let batches = Mutex(0)
        let cache = KeyedMonoTask<Int, String>(
            maximumEntries: 100,
            resultExpireDuration: .seconds(60),
            maximumBatchSize: 10,
            clock: clock,
            failureExpiry: { _, error in error is KeyedMonoTaskKeyNotLoaded ? .seconds(10) : nil }
        ) { keys in
            batches.withLock { $0 += 1 }
            return Dictionary(uniqueKeysWithValues: keys.filter { $0 != 7 }.map { ($0, "\($0)") })
        }
        let first = await cache.values(for: [1, 7])
        #expect(try first[1]?.get() == "1")
        #expect(throws: KeyedMonoTaskKeyNotLoaded.self) { try first[7]?.get() }
        let again = await cache.values(for: [1, 7])  // both answered at once
        #expect(throws: KeyedMonoTaskKeyNotLoaded.self) { try again[7]?.get() }
        #expect(batches.withLock { $0 } == 1)
        clock.advance(by: .seconds(10))
        _ = await cache.values(for: [7])
        #expect(batches.withLock { $0 } == 2)
    }

    @Test func monoTaskAnswersAKeptFailureWithoutLoadingUntilItExpires() async throws {
        let clock = ManualClock()
        let loads = Mutex(0)
        let profile = MonoTask<String>(clock: clock, failureExpiry: { _ in .seconds(5) }) {
            loads.withLock { $0 += 1 }
            return .failure(NotFound())
        }
        await #expect(throws: NotFound.self) { try await profile.executeThrows() }
        clock.advance(by: .seconds(4))
        await #expect(throws: NotFound.self) { try await profile.executeThrows() }
        #expect(loads.withLock { $0 } == 1 && profile.counters.negativeHits == 1)
        clock.advance(by: .seconds(1))
        await #expect(throws: NotFound.self) { try await profile.executeThrows() }
        #expect(loads.withLock { $0 } == 2)
    }

    // MARK: Fail-safe

    @Test func monoTaskAnswersAFailedReloadWithTheExpiredValueForTheThrottle() async throws {
        let clock = ManualClock()
        let upstream = Mutex((failing: false, loads: 0))
        let config = MonoTask<String>(
            resultExpireDuration: .seconds(60),
            failSafe: FailSafe(maximumStaleness: .seconds(600), throttle: .seconds(30)),
            clock: clock
        ) {
            upstream.withLock { state in
                state.loads += 1
                return state.failing ? .failure(NotFound()) : .success("config \(state.loads)")
            }
        }
        #expect(try await config.executeThrows() == "config 1")
        upstream.withLock { $0.failing = true }
        clock.advance(by: .seconds(60))
        #expect(try await config.executeThrows() == "config 1")  // the reload failed
        clock.advance(by: .seconds(29))
        #expect(try await config.executeThrows() == "config 1")  // the throttle: no load
        #expect(upstream.withLock { $0.loads } == 2)
        #expect(config.counters.failSafeHits == 1)
        upstream.withLock { $0.failing = false }
        clock.advance(by: .seconds(1))
        #expect(try await config.executeThrows() == "config 3")
    }

    @Test func keyedMonoTaskWithABatchLoaderAnswersAFailedReloadWithTheExpiredValue() async throws {
        let clock = ManualClock()
        let failing = Mutex(false)
        let cache = KeyedMonoTask<Int, String>(
            maximumEntries: 100,
            resultExpireDuration: .seconds(10),
            failSafe: FailSafe(maximumStaleness: .seconds(60)),
            maximumBatchSize: 10,
            clock: clock
        ) { keys in
            if failing.withLock({ $0 }) { throw NotFound() }
            return Dictionary(uniqueKeysWithValues: keys.map { ($0, "v\($0)") })
        }
        _ = await cache.values(for: [1, 2])
        failing.withLock { $0 = true }
        clock.advance(by: .seconds(10))
        let during = await cache.values(for: [1, 2, 3])
        #expect(try during[1]?.get() == "v1" && during[2]?.get() == "v2")
        #expect(throws: NotFound.self) { try during[3]?.get() }  // never loaded: the error
        #expect(cache.counters.failSafeHits == 2)
    }

    // MARK: Soft timeout

    @Test func keyedMonoTaskAnswersWithTheExpiredValueWhenItsReloadIsSlowAndStoresTheReloadLater() async throws {
        let clock = ManualClock()
        let gate = TestGate()
        let loads = Mutex(0)
        let cache = KeyedMonoTask<Int, String>(
            maximumEntries: 100,
            resultExpireDuration: .seconds(10),
            failSafe: FailSafe(maximumStaleness: .seconds(60), softTimeout: .seconds(1)),
            clock: clock
        ) { key in
            let count = loads.withLock { $0 += 1; return $0 }
            if count > 1 { await gate.wait() }  // the reload is slow
            return "v\(count)"
        }
        #expect(try await cache.value(for: 1) == "v1")
        clock.advance(by: .seconds(10))
        let caller = Task { try await cache.value(for: 1) }
        let callback = TestGate()
        let answered = Mutex<String?>(nil)
        await clock.waitForSleepers(count: 1)
        cache.value(for: 1) { result in
            answered.withLock { $0 = try? result.get() }
            callback.open()
        }
        await clock.waitForSleepers(count: 2)
        clock.advance(by: .seconds(1))
        #expect(try await caller.boundedValue() == "v1")  // the reload still runs
        await callback.wait()
        #expect(answered.withLock { $0 } == "v1")
        #expect(cache.counters.softTimeouts == 2)
        gate.open()
        await eventually("the reload stored its value") { cache.cachedValue(for: 1) == "v2" }
        #expect(loads.withLock { $0 } == 2)
    }

    @Test func monoTaskAnswersWithTheExpiredValueWhenItsReloadIsSlow() async throws {
        let clock = ManualClock()
        let gate = TestGate()
        let loads = Mutex(0)
        let config = MonoTask<String>(
            resultExpireDuration: .seconds(10),
            failSafe: FailSafe(maximumStaleness: .seconds(60), softTimeout: .seconds(2)),
            clock: clock
        ) {
            let count = loads.withLock { $0 += 1; return $0 }
            if count > 1 { await gate.wait() }
            return .success("v\(count)")
        }
        #expect(try await config.executeThrows() == "v1")
        clock.advance(by: .seconds(10))
        let caller = Task { try await config.executeThrows() }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(2))
        #expect(try await caller.boundedValue() == "v1")
        #expect(config.counters.softTimeouts == 1)
        gate.open()
        await eventually("the reload stored its value") { config.currentResult == "v2" }
    }

    // MARK: Refresh ahead

    @Test func keyedMonoTaskRefreshesAKeyInUseBeforeItExpiresAndCallersNeverWait() async throws {
        let clock = ManualClock()
        let loads = Mutex(0)
        let cache = KeyedMonoTask<String, Int>(
            maximumEntries: 100, resultExpireDuration: .seconds(100), refreshAhead: .fraction(0.8), clock: clock
        ) { _ in
            loads.withLock { $0 += 1; return $0 }
        }
        #expect(try await cache.value(for: "k") == 1)
        _ = try await cache.value(for: "idle")
        clock.advance(by: .seconds(79))
        #expect(try await cache.value(for: "k") == 1)
        #expect(cache.counters.refreshesAhead == 0)
        clock.advance(by: .seconds(1))
        #expect(try await cache.value(for: "k") == 1)  // due: served at once, reloaded behind
        await eventually { cache.cachedValue(for: "k") == 3 }
        #expect(cache.counters.refreshesAhead == 1)
        clock.advance(by: .seconds(20))  // 100 s: "idle" (never hit when due) expires; "k" does not
        #expect(cache.cachedValue(for: "idle") == nil)
        #expect(try await cache.value(for: "k") == 3)
        #expect(cache.counters.loads == 3)
    }

    @Test func keyedMonoTaskWithABatchLoaderBatchesItsRefreshesAhead() async throws {
        let clock = ManualClock()
        let batches = Mutex<[[Int]]>([])
        let cache = KeyedMonoTask<Int, Int>(
            maximumEntries: 100, resultExpireDuration: .seconds(10), refreshAhead: .age(.seconds(5)),
            maximumBatchSize: 10, clock: clock
        ) { keys in
            let round = batches.withLock { $0.append(keys.sorted()); return $0.count }
            return Dictionary(uniqueKeysWithValues: keys.map { ($0, round) })
        }
        _ = await cache.values(for: [1, 2, 3])
        clock.advance(by: .seconds(6))
        let served = await cache.values(for: [1, 2, 3])
        #expect(try served.mapValues { try $0.get() } == [1: 1, 2: 1, 3: 1])
        await eventually { cache.cachedValue(for: 3) == 2 }
        #expect(batches.withLock { $0 } == [[1, 2, 3], [1, 2, 3]])
        #expect(cache.counters.refreshesAhead == 3)
    }

    // MARK: Removal listener

    @Test func keyedMonoTaskTellsItsRemovalListenerEveryCachedValueThatLeavesAndWhy() async throws {
        let clock = ManualClock()
        let removed = Mutex<[String]>([])
        let holder = Mutex<KeyedMonoTask<String, String>?>(nil)
        let cache = KeyedMonoTask<String, String>(
            maximumEntries: 3, resultExpireDuration: .seconds(10), clock: clock,
            tags: { key, _ in key.hasPrefix("user42") ? ["user:42"] : [] },
            onRemoval: { key, value, cause in
                // Outside every lock: the listener may read the cache (a lock held here would
                // never be released, and the suite's time limit would fail the test).
                _ = holder.withLock { $0 }?.cachedValue(for: key)
                removed.withLock { $0.append("\(key)=\(value) \(cause)") }
            }
        ) { key in
            key
        }
        holder.withLock { $0 = cache }
        _ = try await cache.value(for: "a")
        cache.put("a2", for: "a")
        _ = try await cache.value(for: "user42-x")
        _ = try await cache.value(for: "b")
        _ = try await cache.value(for: "a")  // a hit: read since it entered the queue
        _ = try await cache.value(for: "c")  // at the bound: the oldest unread, "user42-x", goes
        clock.advance(by: .seconds(10))
        _ = try await cache.value(for: "b")  // expired: dropped, reloaded
        cache.invalidate("c")
        cache.invalidate(tag: "user:42")  // "user42-x" was evicted: nothing left to remove
        #expect(removed.withLock { $0 } == [
            "a=a replaced", "user42-x=user42-x evicted_size", "b=b expired", "c=c invalidated",
        ])
        let counters = cache.counters
        #expect(counters.replacements == 1 && counters.evictions == 1 && counters.expirations == 1)
        #expect(counters.invalidations == 1)
        holder.withLock { $0 = nil }
    }

    @Test func keyedMonoTaskNeverTellsItsListenerOfOneKeyConcurrentlyAndLosesNoRemoval() async throws {
        let busy = Mutex<Set<Int>>([])
        let overlaps = Mutex(0)
        let removedValues = Mutex<[Int]>([])
        let cache = KeyedMonoTask<Int, Int>(
            maximumEntries: 3, resultExpireDuration: nil,
            onRemoval: { key, value, _ in
                let entered = busy.withLock { $0.insert(key).inserted }
                if !entered { overlaps.withLock { $0 += 1 } }
                for _ in 0..<50 { _ = busy.withLock { $0.count } }  // stay a while
                if entered { _ = busy.withLock { $0.remove(key) } }
                removedValues.withLock { $0.append(value) }
            }
        ) { key in key }
        let puts = 8 * 400
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var random = SeededRandomNumberGenerator(seed: UInt64(worker + 1))
                    for step in 0..<400 {
                        let key = Int.random(in: 0..<5, using: &random)
                        cache.put(worker * 1_000 + step, for: key)  // every value distinct
                        if Int.random(in: 0..<10, using: &random) == 0 { cache.invalidate(key) }
                    }
                }
            }
        }
        cache.invalidateAll()
        #expect(overlaps.withLock { $0 } == 0)
        let values = removedValues.withLock { $0 }
        #expect(values.count == puts)  // every value put was removed once, by some cause
        #expect(Set(values).count == puts)
    }

    // MARK: Priming and bulk invalidation

    @Test func keyedMonoTaskServesAPutValueAndALoadInFlightDoesNotOverwriteIt() async throws {
        let clock = ManualClock()
        let gate = TestGate()
        let loads = Mutex(0)
        let users = KeyedMonoTask<Int, String>(maximumEntries: 100, resultExpireDuration: .seconds(60), clock: clock) { id in
            loads.withLock { $0 += 1 }
            await gate.wait()
            return "loaded \(id)"
        }
        users.put("written 1", for: 1)  // a write-through: no load
        #expect(try await users.value(for: 1) == "written 1")
        let waiting = Task { try await users.value(for: 2) }
        await eventually("the load of 2 started") { loads.withLock { $0 } == 1 }
        users.put("written 2", for: 2)
        #expect(try await users.value(for: 2) == "written 2")  // a hit, while the load runs
        gate.open()
        #expect(try await waiting.boundedValue() == "loaded 2")  // its caller gets its result
        #expect(users.cachedValue(for: 2) == "written 2")  // not stored over the value put
        #expect(loads.withLock { $0 } == 1)
    }

    @Test func monoTaskServesAPutValueAndALoadInFlightDoesNotOverwriteIt() async throws {
        let clock = ManualClock()
        let gate = TestGate()
        let loads = Mutex(0)
        let settings = MonoTask<String>(resultExpireDuration: .seconds(60), clock: clock) {
            loads.withLock { $0 += 1 }
            await gate.wait()
            return .success("loaded")
        }
        settings.put("written")  // a write-through: no load
        #expect(try await settings.executeThrows() == "written")
        let waiting = Task { try await settings.executeThrows(forceUpdate: true) }
        await eventually("the load started") { loads.withLock { $0 } == 1 }
        settings.put("written again")
        #expect(try await settings.executeThrows() == "written again")  // a hit, while the load runs
        gate.open()
        #expect(try await waiting.boundedValue() == "loaded")  // its caller gets its result
        #expect(settings.currentResult == "written again")  // not stored over the value put
        #expect(loads.withLock { $0 } == 1)
    }

    @Test func keyedMonoTaskInvalidatesEveryKeyAPredicateSelects() async throws {
        struct Key: Hashable, Sendable { var user: Int; var item: Int }
        let cache = KeyedMonoTask<Key, String>(maximumEntries: 10_000, resultExpireDuration: .seconds(60)) { key in
            "\(key.user)/\(key.item)"
        }
        for user in 40..<45 {
            for item in 0..<100 { cache.put("\(user)/\(item)", for: Key(user: user, item: item)) }
        }
        cache.invalidate { $0.user == 42 }  // everything of user 42
        #expect(cache.count == 400)
        #expect(cache.cachedValue(for: Key(user: 42, item: 7)) == nil)
        #expect(cache.cachedValue(for: Key(user: 43, item: 7)) == "43/7")
        #expect(cache.counters.invalidations == 100)
    }

    @Test func keyedMonoTaskInvalidatesEveryValueWithATag() async throws {
        struct Order: Sendable { var user: Int; var id: Int }
        let orders = KeyedMonoTask<Int, Order>(
            maximumEntries: 1_000,
            resultExpireDuration: .seconds(60),
            tags: { _, order in ["user:\(order.user)"] }
        ) { id in
            Order(user: id % 3, id: id)
        }
        for id in 0..<30 { _ = try await orders.value(for: id) }
        orders.invalidate(tag: "user:1")
        #expect(orders.count == 20)
        #expect(orders.cachedValue(for: 1) == nil && orders.cachedValue(for: 3) != nil)
        #expect(orders.counters.invalidations == 10)
    }

    @Test func monoTaskKeepsTheValueForItsOwnLifetime() async throws {
        let clock = ManualClock()
        let lifetimes = Mutex([Duration.seconds(30), .seconds(3600)])
        let token = MonoTask<Token>(clock: clock, expiry: { $0.expiresIn }) {
            .success(Token(value: "token", expiresIn: lifetimes.withLock { $0.removeFirst() }))
        }
        // The default time to live is zero (nothing cached); the token's own 30 s keeps it.
        let first = try await token.executeThrows()
        #expect(first.expiresIn == .seconds(30))
        clock.advance(by: .seconds(29))
        #expect(token.currentResult == first)
        clock.advance(by: .seconds(1))
        #expect(token.currentResult == nil)
        let second = try await token.executeThrows()
        #expect(second.expiresIn == .seconds(3600))
        clock.advance(by: .seconds(3599))
        #expect(token.currentResult == second)
    }
}
