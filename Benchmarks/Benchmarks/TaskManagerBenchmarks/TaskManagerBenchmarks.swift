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
        for _ in benchmark.scaledIterations {
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
