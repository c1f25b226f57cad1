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
//   paired benchmark interleaves 10 x 1,000 of each per sample.
//
// Figures are per sample (100,000 tasks): divide `mallocCountTotal` by 100,000 for mallocs per
// task. The ratio is TaskManager's wall clock over the baseline's, from the same run.
//
// Measured (2 cores, release, 10 samples): on a quiet machine (2026-11-23) TaskGroup 147/150 ms
// (p0/p50) and 6.0 mallocs/task; one pass-through interceptor 1.95x/2.39x the baseline, no
// interceptor 1.77x/2.38x, both 7.0 mallocs/task. Under load (earlier runs) 2.1–2.7x at p50.
// Before the hot-path work: 3.8x with 15 mallocs/task, and 3.4x with 10 without the interceptor.
//
// After the entry table (array-indexed sliding window instead of the id → entry dictionary) and
// moving actions out of action lists, the old and new binaries alternated three times on a quiet
// machine (2026-11-23, p0/p50 per run): one pass-through interceptor 286–379/295–401 ->
// 210–298/266–317 ms, no interceptor 318–417/331–520 -> 248–297/250–334 ms; the baseline
// 148–178/150–225 ms in the same runs, so the new p50 is 1.4–2.0x the baseline's (the spread
// is the machine's). Still 7.0 mallocs/task: the TaskBox, the execution job's closure context
// (an `@isolated(any)` closure stores its isolation, so even a single capture allocates), the
// job and what `Task.init` allocates; the baseline has all but the box.
// Profile of the remaining gap (perf, interceptor variant): malloc/free ~20%, retain/release
// ~12%, kernel ~15% (the futex calls are dispatch's worker-thread semaphores, about 4x the
// baseline's, not the manager's lock), generic-metadata lookups from the unspecialised
// `TaskBox<T>` ~5% (about six per task); the state machine's own functions are each under 1%.
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
        let manager = TaskManager()
        let durations = await pairedDurations(
            rounds: 10,
            subject: { await roundTripsThroughManager(manager) },
            baseline: { await roundTripsThroughTaskGroup() }
        )
        benchmark.measurement(ratioMetric, durations.percent)
        benchmark.measurement(subjectPerTaskMetric, PairedDurations.nanoseconds(durations.subject, per: 10 * roundTrips))
        benchmark.measurement(baselinePerTaskMetric, PairedDurations.nanoseconds(durations.baseline, per: 10 * roundTrips))
    }
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
