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
import Benchmark
import BenchmarkSupport
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
        let task = MonoTask<Int>(resultExpireDuration: 60) { .success(42) }
        _ = await task.asyncExecute()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(await task.asyncExecute())
        }
    }

    Benchmark("MonoTask: cache hit, asyncExecute (TTL infinite)", configuration: hitConfiguration) { benchmark in
        let task = MonoTask<Int>(resultExpireDuration: .infinity) { .success(42) }
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

    let pairedConfiguration = Benchmark.Configuration(
        metrics: [ratioMetric, subjectPerCallerMetric, baselinePerCallerMetric],
        warmupIterations: 3,
        scalingFactor: .one,
        maxDuration: .seconds(10),
        maxIterations: 200
    )

    Benchmark("MonoTask / actor+Task: 100 callers merged, paired", configuration: pairedConfiguration) { benchmark in
        let durations = await pairedDurations(
            rounds: pairedRounds, subject: { await monoTaskMergedBatch() }, baseline: { await actorMergedBatch() }
        )
        benchmark.measurement(ratioMetric, durations.percent)
        benchmark.measurement(subjectPerCallerMetric, PairedDurations.nanoseconds(durations.subject, per: pairedRounds * callers))
        benchmark.measurement(baselinePerCallerMetric, PairedDurations.nanoseconds(durations.baseline, per: pairedRounds * callers))
    }
}

let ratioMetric = BenchmarkMetric.custom("ratio %", polarity: .prefersSmaller, useScalingFactor: false)
let subjectPerCallerMetric = BenchmarkMetric.custom("MonoTask ns/caller", polarity: .prefersSmaller, useScalingFactor: false)
let baselinePerCallerMetric = BenchmarkMetric.custom("actor ns/caller", polarity: .prefersSmaller, useScalingFactor: false)

/// Batches of each side per paired sample.
let pairedRounds = 20

/// 100 callers join one MonoTask execution, which completes once all have joined.
func monoTaskMergedBatch() async {
    let gate = BenchGate()
    let task = MonoTask<Int>(resultExpireDuration: 0) {
        await gate.wait()
        return .success(42)
    }
    await withTaskGroup(of: Int.self) { group in
        for _ in 0..<callers {
            group.addTask { (try? await task.executeThrows()) ?? -1 }
        }
        while task.counters.mergedCallers < callers - 1 { await Task.yield() }
        gate.open()
        var sum = 0
        for await value in group { sum += value }
        precondition(sum == 42 * callers, "every caller gets the one result")
    }
}

/// The same with the hand-written actor.
func actorMergedBatch() async {
    let gate = BenchGate()
    let cache = NaiveSingleFlight(ttl: .zero) {
        await gate.wait()
        return 42
    }
    await withTaskGroup(of: Int.self) { group in
        for _ in 0..<callers {
            group.addTask { (try? await cache.value()) ?? -1 }
        }
        while await cache.joined < callers - 1 { await Task.yield() }
        gate.open()
        var sum = 0
        for await value in group { sum += value }
        precondition(sum == 42 * callers, "every caller gets the one result")
    }
}

let callers = 100

/// The single-flight cache as commonly written by hand: an actor with the cached value and the
/// in-flight `Task`. Correct for this workload (no cancellation, retry or cache control).
actor NaiveSingleFlight {
    private var cached: (value: Int, storedAt: ContinuousClock.Instant)?
    private var inFlight: Task<Int, any Error>?
    private let ttl: Duration
    private let work: @Sendable () async throws -> Int
    /// Callers that joined an in-flight task (for the benchmark's barrier).
    private(set) var joined = 0

    init(ttl: Duration, work: @escaping @Sendable () async throws -> Int) {
        self.ttl = ttl
        self.work = work
    }

    func value() async throws -> Int {
        if let cached, cached.storedAt.duration(to: .now) < ttl {
            return cached.value
        }
        if let inFlight {
            joined += 1
            return try await inFlight.value
        }
        let task = Task { try await work() }
        inFlight = task
        defer { inFlight = nil }
        let value = try await task.value
        cached = (value, .now)
        return value
    }
}
