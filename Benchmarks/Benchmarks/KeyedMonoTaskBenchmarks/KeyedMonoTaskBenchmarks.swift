// KeyedMonoTask against the keyed single-flight cache people write by hand: an `actor` holding
// `[Key: Task]` (no expiry, no bound, no cancellation: the cheapest correct version). Both run
// in the same process, same workload, interleaved per benchmark.
//
// - "hit, 100,000 keys, 4 tasks": 100,000 cached keys; 4 child tasks read them in parallel in a
//   shuffled order, 1,000,000 reads per sample (`scalingFactor: .mega`), so figures are per read.
// - "1,000 keys x 100 callers": 100,000 child tasks ask for 1,000 keys (100 each, interleaved);
//   every load waits until all 99,000 other callers have joined, so each key is loaded exactly
//   once (checked). Figures are per sample of 100,000 callers (NOTES divides by 100,000).
// - "memory, 100,000 entries": net bytes still allocated after filling a new cache with 100,000
//   entries (`memoryLeakedBytes`, the cache kept alive past the measurement). Per sample of
//   100,000 entries (NOTES divides).
import Benchmark
import BenchmarkSupport
import TaskKit

let keyCount = 100_000
let hitReaders = 4

/// The shuffled read order of the hit benchmarks (a fixed seed: the same order in every run).
let readOrder: [Int] = {
    var generator = SplitMix(seed: 21)
    return (0..<keyCount).shuffled(using: &generator)
}()

/// Filled once, on first use, outside the measured region.
let hitCache = KeyedMonoTask<Int, Int>(maximumEntries: keyCount, resultExpireDuration: .seconds(3_600)) { $0 }
let naiveHitCache = NaiveKeyedCache { $0 }

let benchmarks: @Sendable () -> Void = {
    let hitConfiguration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal],
        warmupIterations: 2,
        scalingFactor: .mega,
        maxDuration: .seconds(5),
        maxIterations: 30
    )
    let batchConfiguration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal],
        warmupIterations: 1,
        scalingFactor: .one,
        maxDuration: .seconds(6),
        maxIterations: 20
    )
    let memoryConfiguration = Benchmark.Configuration(
        metrics: [.memoryLeakedBytes, .mallocCountTotal],
        warmupIterations: 1,
        scalingFactor: .one,
        maxDuration: .seconds(6),
        maxIterations: 10
    )

    // MARK: Hit path

    Benchmark("KeyedMonoTask: hit, 100,000 keys, 4 tasks in parallel", configuration: hitConfiguration) { benchmark in
        if hitCache.count < keyCount { _ = await hitCache.values(for: 0..<keyCount) }
        precondition(hitCache.count == keyCount)
        let reads = benchmark.scaledIterations.count / hitReaders
        benchmark.startMeasurement()
        await withTaskGroup(of: Int.self) { group in
            for reader in 0..<hitReaders {
                group.addTask {
                    var sum = 0
                    var position = reader * (keyCount / hitReaders)
                    for _ in 0..<reads {
                        sum &+= (try? await hitCache.value(for: readOrder[position])) ?? 0
                        position += 1
                        if position == keyCount { position = 0 }
                    }
                    return sum
                }
            }
            for await sum in group { blackHole(sum) }
        }
    }

    Benchmark("Baseline actor [Key: Task]: hit, 100,000 keys, 4 tasks in parallel", configuration: hitConfiguration) {
        benchmark in
        if await naiveHitCache.count < keyCount {
            for key in 0..<keyCount { _ = try? await naiveHitCache.value(for: key) }
        }
        let reads = benchmark.scaledIterations.count / hitReaders
        benchmark.startMeasurement()
        await withTaskGroup(of: Int.self) { group in
            for reader in 0..<hitReaders {
                group.addTask {
                    var sum = 0
                    var position = reader * (keyCount / hitReaders)
                    for _ in 0..<reads {
                        sum &+= (try? await naiveHitCache.value(for: readOrder[position])) ?? 0
                        position += 1
                        if position == keyCount { position = 0 }
                    }
                    return sum
                }
            }
            for await sum in group { blackHole(sum) }
        }
    }

    Benchmark("KeyedMonoTask: hit, 100,000 keys, 1 task", configuration: hitConfiguration) { benchmark in
        if hitCache.count < keyCount { _ = await hitCache.values(for: 0..<keyCount) }
        var position = 0
        benchmark.startMeasurement()
        var sum = 0
        for _ in benchmark.scaledIterations {
            sum &+= (try? await hitCache.value(for: readOrder[position])) ?? 0
            position += 1
            if position == keyCount { position = 0 }
        }
        blackHole(sum)
    }

    // MARK: 1,000 keys x 100 callers

    Benchmark("KeyedMonoTask: 1,000 keys x 100 concurrent callers (per sample of 100,000 callers)", configuration: batchConfiguration) {
        benchmark in
        for _ in benchmark.scaledIterations {
            let gate = BenchGate()
            let cache = KeyedMonoTask<Int, Int>(maximumEntries: distinctKeys, resultExpireDuration: .seconds(60)) { key in
                await gate.wait()
                return key
            }
            let sum = await callEveryKey(
                { key in (try? await cache.value(for: key)) ?? -1 },
                allJoined: { cache.counters.merges == distinctKeys * (callersPerKey - 1) },
                open: gate.open
            )
            precondition(sum == expectedSum, "every caller gets its key's value")
            precondition(cache.counters.loads == distinctKeys, "every key loaded once")
        }
    }

    Benchmark("Baseline actor [Key: Task]: 1,000 keys x 100 concurrent callers (per sample of 100,000 callers)", configuration: batchConfiguration) {
        benchmark in
        for _ in benchmark.scaledIterations {
            let gate = BenchGate()
            let cache = NaiveKeyedCache { key in
                await gate.wait()
                return key
            }
            let sum = await callEveryKey(
                { key in (try? await cache.value(for: key)) ?? -1 },
                allJoined: { await cache.calls == distinctKeys * callersPerKey },
                open: gate.open
            )
            precondition(sum == expectedSum, "every caller gets its key's value")
            let loads = await cache.loads
            precondition(loads == distinctKeys, "every key loaded once")
        }
    }

    // MARK: Memory per entry

    Benchmark("KeyedMonoTask: memory, 100,000 cached entries (bytes per sample)", configuration: memoryConfiguration) {
        benchmark in
        benchmark.startMeasurement()
        let cache = KeyedMonoTask<Int, Int>(maximumEntries: keyCount, resultExpireDuration: .seconds(3_600)) { $0 }
        var results = await cache.values(for: 0..<keyCount)
        precondition(results.count == keyCount && cache.count == keyCount)
        results = [:]
        await settle()
        benchmark.stopMeasurement()
        blackHole(results)
        blackHole(cache)
    }

    Benchmark("Baseline actor [Key: Task]: memory, 100,000 cached entries (bytes per sample)", configuration: memoryConfiguration) {
        benchmark in
        benchmark.startMeasurement()
        let cache = NaiveKeyedCache { $0 }
        for key in 0..<keyCount { _ = try? await cache.value(for: key) }
        await settle()
        benchmark.stopMeasurement()
        blackHole(cache)
    }
}

let distinctKeys = 1_000
let callersPerKey = 100
let expectedSum = (0..<distinctKeys).reduce(0, +) * callersPerKey

/// 100 child tasks (one per caller round), each with 1,000 children (one per key): 100,000
/// concurrent callers, 100 per key. Nested rather than one group of 100,000 children, because
/// the runtime removes a finished child from its parent's record list by walking it, which is
/// quadratic in a group that large (10 s per sample for either cache). Opens the gate once
/// `allJoined` holds; returns the sum of the values.
func callEveryKey(
    _ call: @escaping @Sendable (Int) async -> Int,
    allJoined: @Sendable () async -> Bool,
    open: () -> Void
) async -> Int {
    await withTaskGroup(of: Int.self) { rounds in
        for _ in 0..<callersPerKey {
            rounds.addTask {
                await withTaskGroup(of: Int.self) { callers in
                    for key in 0..<distinctKeys {
                        callers.addTask { await call(key) }
                    }
                    return await callers.reduce(0, +)
                }
            }
        }
        while await !allJoined() { await Task.yield() }
        open()
        return await rounds.reduce(0, +)
    }
}

/// Lets finished load tasks be released before the memory is read.
func settle() async {
    for _ in 0..<100 { await Task.yield() }
    try? await Task.sleep(for: .milliseconds(20))
}

/// The keyed single-flight cache as commonly written by hand: an actor with one `Task` per key,
/// kept forever. Correct for these workloads (no expiry, bound, invalidation or cancellation).
actor NaiveKeyedCache {
    private var tasks: [Int: Task<Int, any Error>] = [:]
    private let load: @Sendable (Int) async throws -> Int
    /// Calls that reached the actor (for the benchmark's barrier) and loads started.
    private(set) var calls = 0
    private(set) var loads = 0

    init(load: @escaping @Sendable (Int) async throws -> Int) {
        self.load = load
    }

    var count: Int { tasks.count }

    func value(for key: Int) async throws -> Int {
        calls += 1
        if let task = tasks[key] {
            return try await task.value
        }
        loads += 1
        let load = load
        let task = Task { try await load(key) }
        tasks[key] = task
        return try await task.value
    }
}

/// SplitMix64: a fixed, portable shuffle.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
