// KeyedMonoTask against the keyed single-flight cache people write by hand: an `actor` holding
// `[Key: Task]` (no expiry, no bound, no cancellation: the cheapest correct version), and against
// the floor of any shared cache: a `Mutex<[Int: Int]>` lookup. All run in the same process, same
// workload, interleaved per benchmark.
//
// - "hit, 100,000 keys, N readers": 100,000 cached keys; N child tasks (1, 2, 4, 8) read them in
//   parallel, each from its own place in one shuffled order, 1,000,000 reads per sample
//   (`scalingFactor: .mega`), so figures are per read.
// - "hit ratio": the share of hits (in basis points, custom metrics) of a `KeyedMonoTask` of
//   10,000 entries and of exact LRU with the same room, on one trace each: Zipf s = 0.8 and 1.0
//   (1M requests over 100,000 keys) and a hot set of 8,000 keys with a one-pass scan.
// - "1,000 keys x 100 callers": 100,000 child tasks ask for 1,000 keys (100 each, interleaved);
//   every load waits until all 99,000 other callers have joined, so each key is loaded exactly
//   once (checked). Figures are per sample of 100,000 callers (NOTES divides by 100,000).
// - "memory, 100,000 entries": net bytes still allocated after filling a new cache with 100,000
//   entries (`memoryLeakedBytes`, the cache kept alive past the measurement). Per sample of
//   100,000 entries (NOTES divides).
// - "fan-out, 1,000 keys" (issue 36): 1,000 task-group children ask at once for 1,000 distinct
//   keys of a new cache (one per sample), whose loader calls a backend costing a fixed ~10 µs of
//   CPU per call (`FanOutWorkloads.swift`): `KeyedMonoTask` with a batch loader (batches of at
//   most 100), the same with a loader of one key, and the hand-written `DataLoader` actor. Each
//   reports the backend calls of each round ("loader calls"; the batched cache's target is at
//   most 10, `fanOutMaximumBatchedCalls`: read its p100). Per sample of 1,000 keys (NOTES
//   divides). The paired row times the batched cache against the `DataLoader` in the same
//   sample, per key, and reports the most loader calls of its rounds on each side.
import Benchmark
import BenchmarkSupport
import SeedWorkloads
import Synchronization
import TaskKit

/// Filled once, on first use, outside the measured region.
let hitCache = KeyedMonoTask<Int, Int>(maximumEntries: keyCount, resultExpireDuration: .seconds(3_600)) { $0 }
let naiveHitCache = NaiveKeyedCache { $0 }
let lockedDictionary = Mutex<[Int: Int]>(Dictionary(uniqueKeysWithValues: (0..<keyCount).map { ($0, $0) }))

let benchmarks: @Sendable () -> Void = {
    let hitConfiguration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal],
        warmupIterations: 2,
        scalingFactor: .mega,
        maxDuration: .seconds(3),
        maxIterations: 15
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

    for readers in [1, 2, 4, 8] {
        Benchmark("KeyedMonoTask: hit, 100,000 keys, \(readers) readers", configuration: hitConfiguration) { benchmark in
            await fillHitCaches(hitCache, naiveHitCache)
            let reads = benchmark.scaledIterations.count / readers
            benchmark.startMeasurement()
            blackHole(await readInParallel(readers: readers, reads: reads) { key in (try? await hitCache.value(for: key)) ?? 0 })
        }

        Benchmark("Baseline actor [Key: Task]: hit, 100,000 keys, \(readers) readers", configuration: hitConfiguration) {
            benchmark in
            await fillHitCaches(hitCache, naiveHitCache)
            let reads = benchmark.scaledIterations.count / readers
            benchmark.startMeasurement()
            blackHole(await readInParallel(readers: readers, reads: reads) { key in (try? await naiveHitCache.value(for: key)) ?? 0 })
        }

        Benchmark("Floor Mutex<[Int: Int]>: lookup, 100,000 keys, \(readers) readers", configuration: hitConfiguration) {
            benchmark in
            let reads = benchmark.scaledIterations.count / readers
            benchmark.startMeasurement()
            blackHole(await readInParallel(readers: readers, reads: reads) { key in lockedDictionary.withLock { $0[key] ?? 0 } })
        }
    }

    // MARK: Hit ratio

    let traces: [(name: String, trace: @Sendable () -> [Int])] = [
        ("Zipf s=0.8", { CacheTrace.zipf(requests: 1_000_000, keys: 100_000, s: 0.8, seed: 35) }),
        ("Zipf s=1.0", { CacheTrace.zipf(requests: 1_000_000, keys: 100_000, s: 1.0, seed: 35) }),
        ("hot 8,000 + one-pass scan", { CacheTrace.hotSetWithScan(requests: 1_000_000, hot: 8_000, seed: 35) }),
    ]
    let keyedRatio = BenchmarkMetric.custom("hit ratio, KeyedMonoTask (bp)", polarity: .prefersLarger, useScalingFactor: false)
    let lruRatio = BenchmarkMetric.custom("hit ratio, exact LRU (bp)", polarity: .prefersLarger, useScalingFactor: false)
    for (name, makeTrace) in traces {
        Benchmark(
            "KeyedMonoTask: hit ratio, \(name), 10,000 entries",
            configuration: .init(metrics: [keyedRatio, lruRatio], warmupIterations: 0, maxIterations: 1)
        ) { benchmark in
            let trace = makeTrace()
            let cache = KeyedMonoTask<Int, Int>(maximumEntries: 10_000, resultExpireDuration: nil) { $0 }
            for key in trace { _ = try? await cache.value(for: key) }
            let counters = cache.counters
            precondition(counters.hits + counters.misses == trace.count && counters.merges == 0)
            benchmark.measurement(keyedRatio, counters.hits * 10_000 / trace.count)
            benchmark.measurement(lruRatio, CacheTrace.lruHits(trace, capacity: 10_000) * 10_000 / trace.count)
        }
    }

    // MARK: 1,000 keys x 100 callers

    Benchmark("KeyedMonoTask: 1,000 keys x 100 concurrent callers (per sample of 100,000 callers)", configuration: batchConfiguration) {
        benchmark in
        for _ in benchmark.scaledIterations {
            await keyedMonoTaskEveryKeyRound()
        }
    }

    Benchmark("Baseline actor [Key: Task]: 1,000 keys x 100 concurrent callers (per sample of 100,000 callers)", configuration: batchConfiguration) {
        benchmark in
        for _ in benchmark.scaledIterations {
            await actorEveryKeyRound()
        }
    }

    // MARK: Fan-out through a batch loader

    let fanOutConfiguration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, loaderCallsMetric],
        warmupIterations: 2,
        scalingFactor: .one,
        maxDuration: .seconds(4),
        maxIterations: 200
    )
    let fanOuts: [(name: String, round: @Sendable () async -> Int)] = [
        ("KeyedMonoTask batched", { await keyedMonoTaskBatchedFanOut() }),
        ("Baseline hand-written DataLoader", { await dataLoaderFanOut() }),
        ("KeyedMonoTask single-key loader", keyedMonoTaskSingleFanOut),
    ]
    for (name, round) in fanOuts {
        Benchmark("\(name): fan-out, 1,000 keys, batches of 100 (per sample of 1,000 keys)", configuration: fanOutConfiguration) {
            benchmark in
            let calls = await round()
            benchmark.stopMeasurement()
            benchmark.measurement(loaderCallsMetric, calls)
        }
    }

    Benchmark(
        "KeyedMonoTask batched vs hand-written DataLoader: fan-out, 1,000 keys, paired",
        configuration: .init(
            metrics: [fanOutRatioMetric, batchedPerKeyMetric, dataLoaderPerKeyMetric, batchedCallsMetric, dataLoaderCallsMetric],
            warmupIterations: 1,
            maxDuration: .seconds(6),
            maxIterations: 30
        )
    ) { benchmark in
        var batchedCalls = 0
        var dataLoaderCalls = 0
        let durations = await pairedDurations(
            rounds: fanOutPairedRounds,
            subject: { batchedCalls = max(batchedCalls, await keyedMonoTaskBatchedFanOut()) },
            baseline: { dataLoaderCalls = max(dataLoaderCalls, await dataLoaderFanOut()) }
        )
        benchmark.measurement(batchedCallsMetric, batchedCalls)
        benchmark.measurement(dataLoaderCallsMetric, dataLoaderCalls)
        benchmark.measurement(fanOutRatioMetric, durations.percent)
        benchmark.measurement(batchedPerKeyMetric, PairedDurations.nanoseconds(durations.subject, per: fanOutPairedRounds * fanOutKeys))
        benchmark.measurement(dataLoaderPerKeyMetric, PairedDurations.nanoseconds(durations.baseline, per: fanOutPairedRounds * fanOutKeys))
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

let loaderCallsMetric = BenchmarkMetric.custom("loader calls", polarity: .prefersSmaller, useScalingFactor: false)
let fanOutRatioMetric = BenchmarkMetric.custom("ratio %", polarity: .prefersSmaller, useScalingFactor: false)
let batchedPerKeyMetric = BenchmarkMetric.custom("KeyedMonoTask ns/key", polarity: .prefersSmaller, useScalingFactor: false)
let dataLoaderPerKeyMetric = BenchmarkMetric.custom("DataLoader ns/key", polarity: .prefersSmaller, useScalingFactor: false)
let batchedCallsMetric = BenchmarkMetric.custom("KeyedMonoTask most calls", polarity: .prefersSmaller, useScalingFactor: false)
let dataLoaderCallsMetric = BenchmarkMetric.custom("DataLoader most calls", polarity: .prefersSmaller, useScalingFactor: false)
/// Fan-out rounds of each side per paired sample.
let fanOutPairedRounds = 10

/// Lets finished load tasks be released before the memory is read.
func settle() async {
    for _ in 0..<100 { await Task.yield() }
    try? await Task.sleep(for: .milliseconds(20))
}
