import Foundation
import Observation
import Testing
import TaskKit
import TaskKitTestSupport

// The README's app quick start, with a fake `api`, so it is known to compile and do what the
// README says (its server quick start: TaskKitHTTPTests' ReadmeServerQuickStartTests).

private struct ReadmeProfile: Sendable, Equatable { var name: String }

private final class ReadmeAPI: Sendable {
    let profileFetches = ReadmeCounter()
    let searches = ReadmeCounter()
    func fetchProfile() async throws -> ReadmeProfile {
        profileFetches.increment()
        try await Task.sleep(for: .milliseconds(20))
        return ReadmeProfile(name: "Ada")
    }
    func search(_ text: String) async throws -> [String] {
        searches.increment()
        try await Task.sleep(for: .milliseconds(50))
        return ["\(text) 1", "\(text) 2"]
    }
}

final class ReadmeCounter: Sendable {
    private let state = LockedState(0)
    func increment() { state.withLock { $0 += 1 } }
    var value: Int { state.withLock { $0 } }
}

private let api = ReadmeAPI()

@MainActor @Observable private final class ReadmeSearchModel {
    enum Key: Hashable { case search }
    let tasks = TaskStore<Key>()
    var results: [String] = []

    func queryChanged(_ text: String) {
        tasks.addTask(forKey: .search, duplicateKeyBehavior: .cancelPrevious(wait: false)) {
            guard let found = try? await api.search(text) else { return }
            await self.show(found)               // runs on the main actor; `await` as isolation is dynamic
        }
    }
    func show(_ found: [String]) { results = found }
    var isSearching: Bool { tasks.taskIsRunning(forKey: .search) }
}

@Suite("README quick starts")
struct ReadmeExampleTests {
    @Test func monoTaskQuickStartMergesTwoCallersIntoOneFetch() async throws {
        let before = api.profileFetches.value
        let profile = MonoTask<ReadmeProfile>(
            retry: .count(count: 3, intervalProxy: .exponential(initial: .milliseconds(500), scaleRate: 2)),
            resultExpireDuration: .seconds(60)
        ) {
            do { return .success(try await api.fetchProfile()) } catch { return .failure(error) }
        }
        async let a = profile.executeThrows()
        async let b = profile.executeThrows()
        let (first, second) = try await (a, b)
        #expect(first == ReadmeProfile(name: "Ada"))
        #expect(second == first)
        #expect(try await profile.executeThrows() == first)   // a cache hit
        #expect(api.profileFetches.value - before == 1)
        profile.clearResult(ongoingExecutionStrategy: .restart)
        #expect(profile.currentResult == nil)
    }

    @MainActor @Test func taskStoreQuickStartKeepsOnlyTheNewestQuery() async {
        let model = ReadmeSearchModel()
        model.queryChanged("s")
        model.queryChanged("sw")
        model.queryChanged("swift")
        #expect(model.isSearching)
        // The search sleeps 50 ms and hops back to the main actor.
        await eventually("the search finished", pollingEvery: .milliseconds(5)) {
            !model.isSearching
        }
        #expect(model.results == ["swift 1", "swift 2"])
    }
}
