// The hit workload of `KeyedMonoTaskBenchmarks` (issue 35), shared with `ParallelPairs`: 100,000
// cached keys read by N child tasks in one shuffled order. Each target keeps its caches in
// globals of its own module: read through a global of another module, a hit measured 93 ns
// where the same code with the global in the benchmark's module measures 74.

import BenchmarkSupport
import TaskKit

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
