// MonoTask against the naive single-flight cache people write by hand: an `actor` holding the
// cached value and the in-flight `Task`. Both run in the same process, same configuration.
//
// - "cache hit": one `asyncExecute()` (or `actor.value()`) on a fresh cached value. Each sample
//   runs 1,000 calls (`scalingFactor: .kilo`), so figures are per call.
// - "100 callers merged": 100 child tasks ask at once; the work waits until all 100 have joined,
//   then completes once; the sample ends when all 100 have their result. Figures are per batch
//   of 100 callers (the README divides them by 100).
// - "MonoTask / actor+Task: 100 callers merged, paired": one sample runs 20 batches of each,
//   interleaved (the side that goes first alternates), and records MonoTask's time in percent of
//   the actor's (`ratio %`) and both per-caller times in ns. Read the ratio's median and spread:
//   pairing cancels most of a shared machine's noise.
// - "MonoTask / gate: 100 callers merged, paired": the same against the batch's floor, 100
//   children that only wait for one gate (a lock and a continuation each): what any merged
//   caller costs before the single-flight machinery (`ratio %`, "gate ns/caller").
//
// The batches are in `Sources/SeedWorkloads/MergedWorkloads.swift`, shared with
// `instruction-counts.sh`.
import Benchmark
import Synchronization
import BenchmarkSupport
import SeedWorkloads
import TaskKit

let benchmarks: @Sendable () -> Void = {
    let hitConfiguration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .instructions],
        warmupIterations: 10,
        scalingFactor: .kilo,
        maxDuration: .seconds(2),
        maxIterations: 1_000
    )
    let batchConfiguration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .instructions],
        warmupIterations: 5,
        scalingFactor: .one,
        maxDuration: .seconds(3),
        maxIterations: 500
    )

    // MARK: Cache hit

    Benchmark("MonoTask: cache hit, asyncExecute (TTL 60 s)", configuration: hitConfiguration) { benchmark in
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60)) { .success(42) }
        _ = await task.asyncExecute()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(await task.asyncExecute())
        }
    }

    Benchmark("MonoTask: cache hit, asyncExecute (TTL infinite)", configuration: hitConfiguration) { benchmark in
        let task = MonoTask<Int>(resultExpireDuration: nil) { .success(42) }
        _ = await task.asyncExecute()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(await task.asyncExecute())
        }
    }

    Benchmark("Baseline actor+Task: cache hit (TTL 60 s)", configuration: hitConfiguration) { benchmark in
        let cache = NaiveSingleFlight(ttl: .seconds(60)) { 42 }
        _ = try? await cache.value()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try? await cache.value())
        }
    }

    // MARK: 100 concurrent callers, one execution

    Benchmark("MonoTask: 100 callers merged into one execution (per batch)", configuration: batchConfiguration) {
        benchmark in
        for _ in benchmark.scaledIterations { await monoTaskMergedBatch() }
    }

    Benchmark("Baseline actor+Task: 100 callers merged into one execution (per batch)", configuration: batchConfiguration) {
        benchmark in
        for _ in benchmark.scaledIterations { await actorMergedBatch() }
    }

    // MARK: The same, paired in one sample

    pairedMergedBenchmark("MonoTask / actor+Task: 100 callers merged, paired", baselineMetric: baselinePerCallerMetric) {
        await actorMergedBatch()
    }
    pairedMergedBenchmark("MonoTask / gate: 100 callers merged, paired", baselineMetric: gatePerCallerMetric) {
        await gateMergedBatch()
    }
}

/// Registers a benchmark whose samples interleave `pairedRounds` MonoTask batches with as many
/// `baseline` batches and record the ratio and both per-caller times.
func pairedMergedBenchmark(
    _ name: String, baselineMetric: BenchmarkMetric, baseline: @escaping @Sendable () async -> Void
) {
    let configuration = Benchmark.Configuration(
        metrics: [ratioMetric, subjectPerCallerMetric, baselineMetric],
        warmupIterations: 3,
        scalingFactor: .one,
        maxDuration: .seconds(10),
        maxIterations: 200
    )
    Benchmark(name, configuration: configuration) { benchmark in
        let durations = await pairedDurations(rounds: pairedRounds, subject: { await monoTaskMergedBatch() }, baseline: baseline)
        benchmark.measurement(ratioMetric, durations.percent)
        benchmark.measurement(subjectPerCallerMetric, PairedDurations.nanoseconds(durations.subject, per: pairedRounds * callers))
        benchmark.measurement(baselineMetric, PairedDurations.nanoseconds(durations.baseline, per: pairedRounds * callers))
    }
}

let ratioMetric = BenchmarkMetric.custom("ratio %", polarity: .prefersSmaller, useScalingFactor: false)
let subjectPerCallerMetric = BenchmarkMetric.custom("MonoTask ns/caller", polarity: .prefersSmaller, useScalingFactor: false)
let baselinePerCallerMetric = BenchmarkMetric.custom("actor ns/caller", polarity: .prefersSmaller, useScalingFactor: false)
let gatePerCallerMetric = BenchmarkMetric.custom("gate ns/caller", polarity: .prefersSmaller, useScalingFactor: false)

/// Batches of each side per paired sample.
let pairedRounds = 20
