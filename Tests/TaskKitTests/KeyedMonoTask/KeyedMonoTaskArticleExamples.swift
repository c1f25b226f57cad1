import Testing
import TaskKitTestSupport
import TaskKitTesting
import TaskKit

/// The README's KeyedMonoTask quick start and the article's manual-clock example, with a fake
/// `api`, so they are known to compile and behave as written. (The article's URLTaskManager
/// example runs for real in the demo's `keyed` scenario.)
@Suite(.scaledTimeLimit(minutes: 1))
struct KeyedMonoTaskArticleExamples {
    struct Profile: Sendable, Equatable { var id: Int }

    final class API: Sendable {
        let fetches = LockedState(0)
        func fetchProfile(id: Int) async throws -> Profile {
            fetches.withLock { $0 += 1 }
            return Profile(id: id)
        }
    }

    @Test func readmeQuickStart() async throws {
        let api = API()
        let profiles = KeyedMonoTask<Int, Profile>(maximumEntries: 10_000, resultExpireDuration: .seconds(60)) { id in
            try await api.fetchProfile(id: id)
        }
        let ada = try await profiles.value(for: 42)  // one load per key, however many callers
        #expect(ada == Profile(id: 42))
        #expect(try await profiles.value(for: 42) == ada)
        #expect(api.fetches.withLock { $0 } == 1)
    }

    /// "A stale value beats an error": an upstream failing for a minute, a caller every second,
    /// values living 10 s, with and without the fail-safe.
    @Test(arguments: [false, true])
    func anUpstreamFailingForAMinute(failSafe: Bool) async throws {
        struct Outage: Error {}
        let clock = ManualClock()
        let upstream = LockedState((failing: false, loads: 0, price: 100.0))
        let prices = KeyedMonoTask<String, Double>(
            maximumEntries: 10_000,
            resultExpireDuration: .seconds(10),
            failSafe: failSafe ? FailSafe(maximumStaleness: .seconds(3_600), throttle: .seconds(30)) : nil,
            clock: clock
        ) { _ in
            try upstream.withLock { state in
                state.loads += 1
                if state.failing { throw Outage() }
                return state.price
            }
        }
        #expect(try await prices.value(for: "ACME") == 100)
        // The minute from the value's expiry (10 s): every load fails; the price moves meanwhile.
        upstream.withLock { $0 = (failing: true, loads: 0, price: 101) }
        clock.advance(by: .seconds(9))
        var errors = 0
        var answers: Set<Double> = []
        for _ in 10..<70 {
            clock.advance(by: .seconds(1))
            do { answers.insert(try await prices.value(for: "ACME")) } catch { errors += 1 }
        }
        let loadsDuringOutage = upstream.withLock { $0.loads }
        upstream.withLock { $0.failing = false }
        clock.advance(by: .seconds(1))  // 70 s: recovered
        let after = try await prices.value(for: "ACME")
        if failSafe {
            #expect(errors == 0 && answers == [100])  // the last price, all minute
            #expect(loadsDuringOutage == 2)  // one a throttle: at 10 s and 40 s
            #expect(prices.counters.failSafeHits == 2 && prices.counters.failures == 2)
        } else {
            #expect(errors == 60 && answers.isEmpty)  // every caller, from the expiry on
            #expect(loadsDuringOutage == 60)
        }
        #expect(after == 101)  // the first load after the outage brings the new price
    }

    @Test func testingWithAManualClock() async throws {
        let clock = ManualClock()
        let cache = KeyedMonoTask<Int, String>(
            maximumEntries: 100, resultExpireDuration: .seconds(10), clock: clock
        ) { id in "user \(id)" }

        _ = try await cache.value(for: 1)  // loads
        #expect(cache.cachedValue(for: 1) == "user 1")
        clock.advance(by: .seconds(10))
        #expect(cache.cachedValue(for: 1) == nil)
        _ = try await cache.value(for: 1)
        #expect(cache.counters.loads == 2)
    }
}
