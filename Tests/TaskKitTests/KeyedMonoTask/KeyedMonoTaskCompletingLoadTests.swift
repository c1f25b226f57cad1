import Foundation
import Testing
import TaskKitTestSupport
import TaskKitTesting
@testable import TaskKit

/// The package's loader that reports through a completion (TaskKitPostgres's flights): the
/// cache's rules hold as with an async load, and the completion may come from any thread.
@Suite(.scaledTimeLimit(minutes: 1))
struct KeyedMonoTaskCompletingLoadTests {
    /// The loads started, each with its completion, answered by the test. A completion holds
    /// its cache (as a flight's does until it ends), and the cache holds the loader that keeps
    /// these: an answered load lets its completion go, so no cycle outlives a test.
    final class Loads: Sendable {
        private let state = LockedState<[(@Sendable (Result<String, any Error>) -> Void)?]>([])

        var count: Int { state.withLock { $0.count } }

        func start(_ key: Int, _ completion: @escaping @Sendable (Result<String, any Error>) -> Void) {
            state.withLock { $0.append(completion) }
        }

        /// Answers load `index` with `result`, from a thread of its own (not a task's).
        func answer(_ index: Int, with result: Result<String, any Error>) {
            let completion = state.withLock { loads in
                defer { loads[index] = nil }
                return loads[index]
            }
            guard let completion else {
                Issue.record("load \(index) was answered already")
                return
            }
            Thread { completion(result) }.start()
        }
    }

    static func make(_ loads: Loads, ttl: Duration? = .seconds(10), clock: ManualClock = ManualClock())
        -> KeyedMonoTask<Int, String>
    {
        KeyedMonoTask<Int, String>(
            maximumEntries: 100, resultExpireDuration: ttl, clock: clock, logger: .silent(label: "test")
        ) { key, completion in
            loads.start(key, completion)
        }
    }

    @Test func callersShareOneLoadAnsweredFromAnotherThreadAndTheValueIsCached() async throws {
        let loads = Loads()
        let cache = Self.make(loads)
        let results = await withTaskGroup(of: String?.self) { group in
            for _ in 0..<50 {
                group.addTask { try? await cache.value(for: 1) }
            }
            await eventually("49 callers merged") { cache.counters.merges == 49 }
            #expect(loads.count == 1)
            loads.answer(0, with: .success("one"))
            return await group.reduce(into: [String?]()) { $0.append($1) }
        }
        #expect(results == Array(repeating: "one", count: 50))
        #expect(try await cache.value(for: 1) == "one")
        #expect(loads.count == 1)
        #expect(cache.counters.hits == 1)
    }

    /// Values made on a thread outside Swift concurrency, each completing a load whose caller
    /// may not have suspended yet: under ThreadSanitizer this fails unless the hand-off is
    /// visible to it (`completions`), as it was before.
    @Test func valuesMadeOnAnotherThreadReachTheirCallers() async throws {
        final class Box: Sendable {
            let value: Int
            init(_ value: Int) { self.value = value }
        }
        let cache = KeyedMonoTask<Int, Box>(
            maximumEntries: 100, resultExpireDuration: .zero, clock: ManualClock(), logger: .silent(label: "test")
        ) { key, completion in
            Thread { completion(.success(Box(key))) }.start()
        }
        var sum = 0
        for key in 0..<5_000 { sum += try await cache.value(for: key).value }
        #expect(sum == (0..<5_000).reduce(0, +))
    }

    @Test func aFailureReachesEveryCallerAndIsNotCached() async throws {
        struct Failure: Error {}
        let loads = Loads()
        let cache = Self.make(loads)
        let a = Task { try await cache.value(for: 1) }
        let b = Task { try await cache.value(for: 1) }
        await eventually("merged") { cache.counters.merges == 1 }
        loads.answer(0, with: .failure(Failure()))
        await #expect(throws: Failure.self) { try await a.boundedValue() }
        await #expect(throws: Failure.self) { try await b.boundedValue() }
        #expect(cache.cachedValue(for: 1) == nil)
        let again = Task { try await cache.value(for: 1) }
        await eventually("a new load") { loads.count == 2 }
        loads.answer(1, with: .success("two"))
        #expect(try await again.boundedValue() == "two")
    }

    @Test func aCancelledCallerLeavesAtOnceAndTheOthersGetTheValue() async throws {
        let loads = Loads()
        let cache = Self.make(loads)
        let leaving = Task { try await cache.value(for: 1) }
        await eventually("the load started") { loads.count == 1 }
        let staying = Task { try await cache.value(for: 1) }
        await eventually("merged") { cache.counters.merges == 1 }
        leaving.cancel()
        await #expect(throws: CancellationError.self) { try await leaving.boundedValue() }
        loads.answer(0, with: .success("one"))
        #expect(try await staying.boundedValue() == "one")
        #expect(cache.cachedValue(for: 1) == "one")
    }

    @Test func aLoadAnsweredAfterAnInvalidationDeliversButIsNotCached() async throws {
        let loads = Loads()
        let cache = Self.make(loads)
        let first = Task { try await cache.value(for: 1) }
        await eventually("the load started") { loads.count == 1 }
        cache.invalidate(1)
        loads.answer(0, with: .success("stale"))
        #expect(try await first.boundedValue() == "stale")
        #expect(cache.cachedValue(for: 1) == nil)
    }
}
