// TaskManager throughput against the same work in a bare `TaskGroup`.
//
// Each sample pushes 100,000 trivial tasks (a class whose `execute()` returns its number) and
// waits until every result has been consumed:
//
// - "TaskGroup baseline": `group.addTask { try await task.execute() }` for each task, then the
//   group's results are summed.
// - "TaskManager, one pass-through interceptor": `manager.add(task:completion:)` for each task on
//   a manager with one interceptor that always answers `.execute`; each completion adds the
//   value to an atomic sum; then `waitTillAllTasksFinished()`.
// - "TaskManager, no interceptor": the same without the interceptor.
// - "TaskManager (one pass-through interceptor) / TaskGroup, paired": one sample runs 100,000
//   tasks through each side twice, interleaved (subject, baseline, baseline, subject), and
//   records the manager's time in percent of the task group's (`ratio %`) and both per-task
//   times. Pairing cancels most of a shared machine's noise: read the ratio's p50 and spread.
// - "value(of:) round trip" / "addTask + next() round trip": one task at a time, awaited before
//   the next (`value(of:)` on a manager without interceptors; `addTask` then `next()` on one
//   task group); 1,000 per sample (`scalingFactor: .kilo`), so figures are per round trip. The
//   paired benchmarks interleave 10 x 1,000 of each per sample: `value(of:)` on a manager
//   without interceptors (the direct lane), and on one with a pass-through interceptor (the
//   general lane, which a manager with interceptors, reactors, a tracer or metrics takes).
//
// Figures are per sample (100,000 tasks): divide `mallocCountTotal` by 100,000 for mallocs per
// task. The ratio is TaskManager's wall clock over the baseline's, from the same run.
//
// Measured figures and their history: Benchmarks/NOTES.md.
import Benchmark
import BenchmarkSupport
import Synchronization
import TaskKit

let benchmarks: @Sendable () -> Void = {
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .cpuTotal, .peakMemoryResident],
        warmupIterations: 1,
        scalingFactor: .one,
        maxDuration: .seconds(20),
        maxIterations: 10
    )

    Benchmark("TaskGroup baseline: 100,000 trivial tasks", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations { await runThroughTaskGroup() }
    }

    Benchmark("TaskManager: 100,000 trivial tasks, one pass-through interceptor", configuration: configuration) {
        benchmark in
        for _ in benchmark.scaledIterations {
            await runThroughManager(TaskManager(interceptors: [TaskManagerBenchPassThrough()]))
        }
    }

    Benchmark("TaskManager: 100,000 trivial tasks, no interceptor", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations {
            await runThroughManager(TaskManager())
        }
    }

    let pairedThroughput = Benchmark.Configuration(
        metrics: [ratioMetric, subjectPerTaskMetric, baselinePerTaskMetric],
        warmupIterations: 1,
        scalingFactor: .one,
        maxDuration: .seconds(60),
        maxIterations: 40
    )

    let pairedRoundTrip = Benchmark.Configuration(
        metrics: [ratioMetric, subjectPerTaskMetric, baselinePerTaskMetric],
        warmupIterations: 3,
        scalingFactor: .one,
        maxDuration: .seconds(10),
        maxIterations: 200
    )

    Benchmark("TaskManager (one pass-through interceptor) / TaskGroup: 100,000 trivial tasks, paired", configuration: pairedThroughput) {
        benchmark in
        let durations = await pairedDurations(
            rounds: 2,
            subject: { await runThroughManager(TaskManager(interceptors: [TaskManagerBenchPassThrough()])) },
            baseline: { await runThroughTaskGroup() }
        )
        benchmark.measurement(ratioMetric, durations.percent)
        benchmark.measurement(subjectPerTaskMetric, PairedDurations.nanoseconds(durations.subject, per: 2 * taskCount))
        benchmark.measurement(baselinePerTaskMetric, PairedDurations.nanoseconds(durations.baseline, per: 2 * taskCount))
    }

    // MARK: One task's round trip

    let roundTrip = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .instructions],
        warmupIterations: 5,
        scalingFactor: .kilo,
        maxDuration: .seconds(3),
        maxIterations: 1_000
    )

    Benchmark("TaskManager: value(of:) round trip", configuration: roundTrip) { benchmark in
        let manager = TaskManager()
        benchmark.startMeasurement()
        for index in benchmark.scaledIterations {
            blackHole(try await manager.value(of: TaskManagerBenchTrivialTask(index)))
        }
    }

    Benchmark("TaskGroup baseline: addTask + next() round trip", configuration: roundTrip) { benchmark in
        await withTaskGroup(of: Int.self) { group in
            benchmark.startMeasurement()
            for index in benchmark.scaledIterations {
                let task = TaskManagerBenchTrivialTask(index)
                group.addTask { (try? await task.execute()) ?? 0 }
                blackHole(await group.next())
            }
        }
    }

    Benchmark("TaskManager value(of:) / TaskGroup addTask + next(): round trip, paired", configuration: pairedRoundTrip) {
        benchmark in
        await measurePairedRoundTrips(benchmark, manager: TaskManager())
    }

    Benchmark(
        "TaskManager value(of:), one pass-through interceptor / TaskGroup addTask + next(): round trip, paired",
        configuration: pairedRoundTrip
    ) { benchmark in
        await measurePairedRoundTrips(benchmark, manager: TaskManager(interceptors: [TaskManagerBenchPassThrough()]))
    }
}

/// One sample of a paired round-trip benchmark: 10 rounds of `roundTrips` through `manager` and
/// through a task group, interleaved; records the ratio and both per-round-trip times.
func measurePairedRoundTrips(_ benchmark: Benchmark, manager: TaskManager) async {
    let durations = await pairedDurations(
        rounds: 10,
        subject: { await roundTripsThroughManager(manager) },
        baseline: { await roundTripsThroughTaskGroup() }
    )
    benchmark.measurement(ratioMetric, durations.percent)
    benchmark.measurement(subjectPerTaskMetric, PairedDurations.nanoseconds(durations.subject, per: 10 * roundTrips))
    benchmark.measurement(baselinePerTaskMetric, PairedDurations.nanoseconds(durations.baseline, per: 10 * roundTrips))
}

let ratioMetric = BenchmarkMetric.custom("ratio %", polarity: .prefersSmaller, useScalingFactor: false)
let subjectPerTaskMetric = BenchmarkMetric.custom("TaskManager ns/task", polarity: .prefersSmaller, useScalingFactor: false)
let baselinePerTaskMetric = BenchmarkMetric.custom("TaskGroup ns/task", polarity: .prefersSmaller, useScalingFactor: false)

/// Sequential round trips per side and round of the paired round-trip benchmark.
let roundTrips = 1_000

/// `roundTrips` sequential `value(of:)` calls.
func roundTripsThroughManager(_ manager: TaskManager) async {
    var sum = 0
    for index in 0..<roundTrips {
        sum += (try? await manager.value(of: TaskManagerBenchTrivialTask(index))) ?? 0
    }
    precondition(sum == roundTrips * (roundTrips - 1) / 2, "every round trip returned its value")
}

/// `roundTrips` sequential `addTask` + `next()` on one task group.
func roundTripsThroughTaskGroup() async {
    let sum = await withTaskGroup(of: Int.self) { group in
        var sum = 0
        for index in 0..<roundTrips {
            let task = TaskManagerBenchTrivialTask(index)
            group.addTask { (try? await task.execute()) ?? 0 }
            sum += await group.next() ?? 0
        }
        return sum
    }
    precondition(sum == roundTrips * (roundTrips - 1) / 2, "every round trip returned its value")
}

/// Runs `taskCount` trivial tasks in a bare task group.
func runThroughTaskGroup() async {
    let sum = await withTaskGroup(of: Int.self) { group in
        for index in 0..<taskCount {
            let task = TaskManagerBenchTrivialTask(index)
            group.addTask { (try? await task.execute()) ?? 0 }
        }
        var sum = 0
        for await value in group { sum += value }
        return sum
    }
    precondition(sum == expectedSum, "every task ran once")
}

let taskCount = 100_000
let expectedSum = taskCount * (taskCount - 1) / 2

/// Adds `taskCount` trivial tasks to `manager` and waits for all of them.
func runThroughManager(_ manager: TaskManager) async {
    let sum = TaskManagerBenchSum()
    for index in 0..<taskCount {
        manager.add(task: TaskManagerBenchTrivialTask(index)) { result in
            if case .success(let value) = result { sum.add(value) }
        }
    }
    await manager.waitTillAllTasksFinished()
    precondition(sum.value == expectedSum, "every task ran once")
}

/// A task that returns its number.
final class TaskManagerBenchTrivialTask: ManagedTask {
    typealias SuccessValue = Int
    let value: Int
    init(_ value: Int) { self.value = value }
    func execute() async throws -> Int { value }
}

/// An interceptor that lets every task through unchanged.
struct TaskManagerBenchPassThrough: Interceptor {
    func intercept<T: ManagedTask>(task: inout T, currentBatchCount: Int) -> InterceptCommand { .execute }
}

/// A sum updated from completions.
final class TaskManagerBenchSum: Sendable {
    private let total = Atomic<Int>(0)
    func add(_ value: Int) { total.add(value, ordering: .relaxed) }
    var value: Int { total.load(ordering: .acquiring) }
}
