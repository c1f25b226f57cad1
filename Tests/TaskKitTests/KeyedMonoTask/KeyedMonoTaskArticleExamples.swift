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
