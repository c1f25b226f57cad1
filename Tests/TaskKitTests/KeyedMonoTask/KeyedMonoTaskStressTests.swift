import Foundation
import Testing
@testable import TaskKit
import TaskKitTestSupport

/// Thousands of concurrent callers over overlapping keys on a real `KeyedMonoTask` (real clock,
/// tiny TTLs, evictions, retries, forced calls, cancellations, every entry point). The clock is
/// `SuspendingClock`, read precisely: the default `ContinuousClock` is read in kernel ticks on
/// Linux, coarser than these TTLs, which would expire every entry at once. Asserts that
/// every caller gets exactly one result, that results are for the right key, and — without
/// invalidation — that no key ever has two loads at once.
@Suite(.scaledTimeLimit(minutes: 2))
struct KeyedMonoTaskStressTests {
    struct Setup: Sendable, CustomTestStringConvertible {
        var maximumEntries: Int
        var ttl: Duration
        var stale: Duration
        var retry: RetryCount
        var invalidates: Bool
        var maximumCost: Int?
        /// How many distinct keys the callers ask for.
        var keys = 32
        var testDescription: String {
            "max \(maximumEntries), keys \(keys), ttl \(ttl), stale \(stale), retry \(retry), invalidates \(invalidates), "
                + "maximumCost \(maximumCost.map(String.init) ?? "none")"
        }
    }

    static let setups: [Setup] = [
        Setup(maximumEntries: 8, ttl: .zero, stale: .zero, retry: .never, invalidates: false),
        Setup(maximumEntries: 8, ttl: .microseconds(300), stale: .microseconds(300), retry: 2, invalidates: false),
        Setup(maximumEntries: 1_000, ttl: .milliseconds(1), stale: .zero, retry: 1, invalidates: false),
        Setup(maximumEntries: 8, ttl: .microseconds(300), stale: .microseconds(300), retry: 1, invalidates: true),
        Setup(maximumEntries: 100, ttl: .milliseconds(1), stale: .microseconds(300), retry: 1, invalidates: false, maximumCost: 40),
        // Two shards of 128 entries, over more keys than they hold: evictions in both.
        Setup(maximumEntries: 256, ttl: .milliseconds(1), stale: .microseconds(300), retry: 1, invalidates: true, keys: 300),
        // Four shards under one cost bound.
        Setup(
            maximumEntries: 512, ttl: .milliseconds(1), stale: .microseconds(300), retry: 1, invalidates: false,
            maximumCost: 600, keys: 300
        ),
    ]

    /// Per key: loads running now, the most ever seen at once, loads started.
    final class Overlap: Sendable {
        private let state = LockedState<(active: [Int: Int], maximum: Int, started: Int)>(([:], 0, 0))

        func enter(_ key: Int) -> Int {
            state.withLock { state in
                state.active[key, default: 0] += 1
                state.maximum = max(state.maximum, state.active[key]!)
                state.started += 1
                return state.started
            }
        }

        func leave(_ key: Int) { state.withLock { $0.active[key]! -= 1 } }
        var maximum: Int { state.withLock { $0.maximum } }
        var running: Int { state.withLock { $0.active.values.reduce(0, +) } }
    }

    @Test(arguments: setups)
    func manyCallersOverOverlappingKeysGetOneResultEachAndLoadsOfAKeyNeverOverlap(_ setup: Setup) async {
        let keys = setup.keys
        let operations = 4_000
        let overlap = Overlap()
        let load: @Sendable (Int) async throws -> String = { key in
            let attempt = overlap.enter(key)
            for _ in 0..<(attempt % 3) { await Task.yield() }
            overlap.leave(key)
            if attempt % 7 == 0 { throw KeyedTestError(key: key, attempt: attempt) }
            return "\(key)"
        }
        let cache = if let maximumCost = setup.maximumCost {
            KeyedMonoTask<Int, String>(
                maximumEntries: setup.maximumEntries, maximumCost: maximumCost, resultExpireDuration: setup.ttl,
                staleWhileRevalidate: setup.stale, retry: setup.retry, clock: SuspendingClock(),
                cost: { key, _ in key % 5 + 1 }, load: load
            )
        } else {
            KeyedMonoTask<Int, String>(
                maximumEntries: setup.maximumEntries, resultExpireDuration: setup.ttl,
                staleWhileRevalidate: setup.stale, retry: setup.retry, clock: SuspendingClock(), load: load
            )
        }
        let deliveries = LockedState<[Int]>(Array(repeating: 0, count: operations))
        let bad = LockedState<[String]>([])
        let callbacksDone = LockedState(0)
        var callbacksExpected = 0

        @Sendable func record(_ index: Int, key: Int, _ result: Result<String, any Error>) {
            deliveries.withLock { $0[index] += 1 }
            switch result {
            case .success("\(key)"), .failure(is CancellationError): break
            case .failure(let error as KeyedTestError) where error.key == key: break
            default: bad.withLock { $0.append("\(index) key \(key): \(result)") }
            }
        }

        await withTaskGroup(of: Void.self) { group in
            var generator = SeededRandomNumberGenerator(seed: 2_100 + UInt64(setup.maximumEntries))
            for index in 0..<operations {
                let key = Int(generator.next() % UInt64(keys))
                let force = generator.next() % 10 == 0
                switch generator.next() % 12 {
                case 0:
                    callbacksExpected += 1
                    cache.value(for: key, forceUpdate: force) { result in
                        record(index, key: key, result)
                        callbacksDone.withLock { $0 += 1 }
                    }
                case 1:
                    let task = Task { () -> Result<String, any Error> in
                        do { return .success(try await cache.value(for: key, forceUpdate: force)) } catch { return .failure(error) }
                    }
                    group.addTask {
                        await Task.yield()
                        task.cancel()
                        record(index, key: key, await task.value)
                    }
                case 2:
                    group.addTask {
                        let results = await cache.values(for: [key, (key + 1) % keys])
                        record(index, key: key, results[key] ?? .failure(KeyedTestError(key: -1, attempt: 0)))
                    }
                case 3 where setup.invalidates:
                    group.addTask {
                        if index % 2 == 0 { cache.invalidate(key) } else { _ = cache.cachedValue(for: key) }
                        deliveries.withLock { $0[index] += 1 }
                    }
                default:
                    group.addTask {
                        do {
                            record(index, key: key, .success(try await cache.value(for: key, forceUpdate: force)))
                        } catch {
                            record(index, key: key, .failure(error))
                        }
                    }
                }
            }
        }
        let expected = callbacksExpected
        await eventually("every callback delivered") { callbacksDone.withLock { $0 } == expected }
        await eventually("every load over") { cache.inspect(\.loadsInFlight).reduce(0, +) == 0 }

        #expect(deliveries.withLock { $0 }.allSatisfy { $0 == 1 }, "every caller exactly one result")
        #expect(bad.withLock { $0 } == [])
        if !setup.invalidates {
            #expect(overlap.maximum == 1, "at most one load per key at a time")
        }
        #expect(overlap.running == 0)
        let counters = cache.counters
        #expect(counters.merges > 0 && counters.callerCancellations > 0 && counters.failures + counters.retries > 0, "\(counters)")
        if (setup.maximumEntries < keys || setup.maximumCost != nil) && setup.ttl > .zero {
            #expect(counters.evictions > 0, "\(counters)")
        }
        #expect(cache.count <= setup.maximumEntries, "the bound holds once loads are over")
        let machines = cache.inspect { $0 }
        #expect(machines.count == KeyedMonoTask<Int, String>.shardCount(maximumEntries: setup.maximumEntries))
        #expect(machines.reduce(0) { $0 + $1.count } == cache.count)
        for machine in machines {
            #expect(machine.detachedLoads == 0)
            #expect(machine.table.index.count == machine.table.count)
            #expect(machine.table.queueOrder.count == machine.table.count)  // every entry idle, in the queue
            if let maximumCost = setup.maximumCost {
                #expect(machine.table.occupancy.totalCost <= maximumCost, "the cost bound holds once loads are over")
                #expect(machine.table.totalCost == machine.table.costs.reduce(0, +))
                let expected = machine.table.nodes.map { $0.value == nil ? 0 : $0.key % 5 + 1 }
                #expect(machine.table.costs == expected)
            }
        }
    }
}
