import Dispatch
import Synchronization
import Testing
import TaskKitTestSupport
@testable import TaskKit

// Helpers for the MonoTask suites. Names carry a `Mono` prefix: other components' suites share
// this test module.

/// A counter that tests can wait on, with a deadline (a ``TestGate``'s arrivals).
final class MonoCounter: Sendable {
    private let gate = TestGate()

    var value: Int { gate.arrivals }

    @discardableResult
    func increment() -> Int { gate.arrive() }

    /// Suspends until the counter reaches `target`; records an issue and returns after `limit`.
    func wait(
        untilAtLeast target: Int, within limit: Duration = TestDeadline.standard,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        await gate.waitForArrivals(target, within: limit, sourceLocation: sourceLocation)
    }
}

/// Tracks how many task blocks run at the same time, and the most ever seen.
final class MonoOverlap: Sendable {
    private let state = LockedState<(active: Int, maximum: Int)>((0, 0))

    func enter() { state.withLock { $0.active += 1; $0.maximum = max($0.maximum, $0.active) } }
    func leave() { state.withLock { $0.active -= 1 } }
    var maximum: Int { state.withLock { $0.maximum } }
    var active: Int { state.withLock { $0.active } }
}

/// A serial executor that counts the jobs enqueued on it: a hop back to an actor shows up here.
final class MonoCountingExecutor: SerialExecutor {
    let enqueued = Atomic<Int>(0)
    private let queue = DispatchQueue(label: "MonoCountingExecutor")

    func enqueue(_ job: consuming ExecutorJob) {
        enqueued.add(1, ordering: .relaxed)
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }
}

/// An actor on a ``MonoCountingExecutor``: measures whether awaiting something suspended it.
actor MonoProbe {
    let executor = MonoCountingExecutor()

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Jobs enqueued on this actor while awaiting `count` cache hits.
    func jobsDuring(hits count: Int, on task: MonoTask<Int>) async -> (jobs: Int, values: [Int]) {
        let before = executor.enqueued.load(ordering: .relaxed)
        var values: [Int] = []
        for _ in 0..<count {
            if case .success(let value) = await task.asyncExecute() { values.append(value) }
        }
        return (executor.enqueued.load(ordering: .relaxed) - before, values)
    }

    /// The control: jobs enqueued while awaiting something that does suspend.
    func jobsDuringYield() async -> Int {
        let before = executor.enqueued.load(ordering: .relaxed)
        await Task.yield()
        return executor.enqueued.load(ordering: .relaxed) - before
    }
}

struct MonoTestError: Error, Equatable {
    var attempt: Int = 0
}
