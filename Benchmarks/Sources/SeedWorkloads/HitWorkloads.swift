// Cache hits: callgrind's workloads (`InstructionCounts`), then the one of `KeyedMonoTaskBenchmarks`
// and `ParallelPairs` (issue 35): 100,000 cached keys read by N child tasks in one shuffled
// order. Those two keep their caches in globals of their own module: read through a global of
// another module, a hit measured 93 ns where the same code with the global in the benchmark's
// module measures 74.

import BenchmarkSupport
import Synchronization
import TaskKit

/// `n` cache hits on a `MonoTask` whose result never expires (no clock read); returns the sum.
/// The value is computed once, before the hits.
public func monoTaskHits(_ n: Int) async -> Int {
    let task = MonoTask<Int>(resultExpireDuration: nil) { .success(1) }
    _ = await task.asyncExecute()
    var sum = 0
    for _ in 0..<n { sum &+= (try? await task.asyncExecute().get()) ?? 0 }
    return sum
}

/// `n` cache hits on a `KeyedMonoTask` holding 1,000 keys, read in order; returns the sum.
/// The keys are loaded once, before the hits.
public func keyedMonoTaskHits(_ n: Int) async -> Int {
    let keys = 1_000
    let cache = KeyedMonoTask<Int, Int>(maximumEntries: keys, resultExpireDuration: .seconds(3_600)) { _ in 1 }
    _ = await cache.values(for: 0..<keys)
    var sum = 0
    for index in 0..<n { sum &+= (try? await cache.value(for: index % keys)) ?? 0 }
    return sum
}

/// `n` lookups in a `Mutex<[Int: Int]>` holding 1,000 keys, read in order, each from an async
/// function as a cache's caller would call it: the floor of a shared cache's hit.
public func lockedDictionaryHits(_ n: Int) async -> Int {
    let keys = 1_000
    let dictionary = Mutex<[Int: Int]>(Dictionary(uniqueKeysWithValues: (0..<keys).map { ($0, 1) }))
    var sum = 0
    for index in 0..<n { sum &+= await lockedLookup(dictionary, index % keys) }
    return sum
}

@inline(never)
func lockedLookup(_ dictionary: borrowing Mutex<[Int: Int]>, _ key: Int) async -> Int {
    dictionary.withLock { $0[key] ?? 0 }
}

// MARK: The hit workload of KeyedMonoTaskBenchmarks and ParallelPairs

public let keyCount = 100_000

/// The shuffled read order of the hit benchmarks (a fixed seed: the same order in every run).
public let readOrder: [Int] = {
    var generator = SplitMix(seed: 21)
    return (0..<keyCount).shuffled(using: &generator)
}()

/// Fills `cache` and `naive` with every key, if not done yet.
public func fillHitCaches(_ cache: KeyedMonoTask<Int, Int>, _ naive: NaiveKeyedCache) async {
    if cache.count < keyCount { _ = await cache.values(for: 0..<keyCount) }
    precondition(cache.count == keyCount && cache.counters.evictions == 0)
    if await naive.count < keyCount {
        for key in 0..<keyCount { _ = try? await naive.value(for: key) }
    }
}

/// Reads `reads` keys in each of `readers` child tasks, each starting at its own place in
/// `readOrder`; returns the sum of the values read when all are done. Inlinable, so that the
/// caller's module specialises it for `read`, as when it lived in the benchmark's module.
@inlinable
public func readInParallel(readers: Int, reads: Int, _ read: @escaping @Sendable (Int) async -> Int) async -> Int {
    await withTaskGroup(of: Int.self) { group in
        for reader in 0..<readers {
            group.addTask {
                var sum = 0
                var position = reader * (keyCount / readers)
                for _ in 0..<reads {
                    sum &+= await read(readOrder[position])
                    position += 1
                    if position == keyCount { position = 0 }
                }
                return sum
            }
        }
        return await group.reduce(0, &+)
    }
}
