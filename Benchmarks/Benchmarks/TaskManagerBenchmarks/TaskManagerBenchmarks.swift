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
//   times. Both sides run the same task objects, made before the sample's clock starts (as an
//   independent harness does), so the ratio compares the two ways of running them, not
//   allocation both pay. "… (no interceptor) / TaskGroup" is the same without the interceptor.
//   Pairing cancels much of a shared machine's noise, not all of it: on this VM the throughput
//   ratio moved little when the manager's instructions per task fell by a quarter
//   (Benchmarks/NOTES.md, 2026-11-27), so read the ratio's p50 and spread together with the
//   instruction counts (`instruction-counts.sh`), and check a bar on a quiet machine.
// - "value(of:) round trip" / "addTask + next() round trip": one task at a time, awaited before
//   the next (`value(of:)` on a manager without interceptors, and on one with a pass-through
//   interceptor, which is what a user with an interceptor runs; `addTask` then `next()` on one
//   task group); 1,000 per sample (`scalingFactor: .kilo`), so figures are per round trip. The
//   paired benchmarks interleave 10 x 1,000 of each per sample, with and without the
//   interceptor.
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
        await measurePairedThroughput(benchmark) { TaskManager(interceptors: [TaskManagerBenchPassThrough()]) }
    }

    Benchmark("TaskManager (no interceptor) / TaskGroup: 100,000 trivial tasks, paired", configuration: pairedThroughput) {
        benchmark in
        await measurePairedThroughput(benchmark) { TaskManager() }
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

    Benchmark("TaskManager: value(of:) round trip, one pass-through interceptor", configuration: roundTrip) { benchmark in
        let manager = TaskManager(interceptors: [TaskManagerBenchPassThrough()])
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

/// One sample of a paired throughput benchmark: 2 rounds of `taskCount` tasks through a new
/// manager and through a task group, interleaved, over the same task objects (made before the
/// clock starts); records the ratio and both per-task times.
func measurePairedThroughput(_ benchmark: Benchmark, manager: () -> TaskManager) async {
    let tasks = (0..<taskCount).map(TaskManagerBenchTrivialTask.init)
    let durations = await pairedDurations(
        rounds: 2,
        subject: { await runThroughManager(manager(), tasks: tasks) },
        baseline: { await runThroughTaskGroup(tasks: tasks) }
    )
    benchmark.measurement(ratioMetric, durations.percent)
    benchmark.measurement(subjectPerTaskMetric, PairedDurations.nanoseconds(durations.subject, per: 2 * taskCount))
    benchmark.measurement(baselinePerTaskMetric, PairedDurations.nanoseconds(durations.baseline, per: 2 * taskCount))
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

/// Runs `taskCount` trivial tasks in a bare task group (`tasks`, or new ones made as it goes).
func runThroughTaskGroup(tasks: [TaskManagerBenchTrivialTask]? = nil) async {
    let sum = await withTaskGroup(of: Int.self) { group in
        for index in 0..<taskCount {
            let task = tasks?[index] ?? TaskManagerBenchTrivialTask(index)
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

/// Adds `taskCount` trivial tasks to `manager` (`tasks`, or new ones made as it goes) and waits
/// for all of them.
func runThroughManager(_ manager: TaskManager, tasks: [TaskManagerBenchTrivialTask]? = nil) async {
    let sum = TaskManagerBenchSum()
    for index in 0..<taskCount {
        manager.add(task: tasks?[index] ?? TaskManagerBenchTrivialTask(index)) { result in
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
