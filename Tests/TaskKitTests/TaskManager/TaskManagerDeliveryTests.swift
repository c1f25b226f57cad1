import Dispatch
import Testing
@testable import TaskKit
import TaskKitTestSupport
import TaskKitTesting

/// Where user code runs: completions on the requested queue for every outcome, and every piece
/// of user code (interceptors, reactors, `didCancel`, completions) outside the manager's lock —
/// each of them calls back into the manager, which would trap on the debug build's
/// error-checking mutex if the lock were held.
@Suite struct TaskManagerDeliveryTests {
    @Test func everyOutcomeIsDeliveredOnTheRequestedQueue() async throws {
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "TaskManagerDeliveryTests")
        queue.setSpecific(key: key, value: "delivery")
        let clock = ManualClock()
        let interceptor = TaskManagerTestInterceptor { name, _ in name == "discarded" ? .discard : .execute }
        let manager = TaskManager(interceptors: [interceptor], clock: clock)
        let done = TaskManagerTestCompletions<Int>()
        let onQueue = TaskManagerTestLog<String>()
        func completion(_ tag: Int) -> @Sendable (Result<Int, any Error>) -> Void {
            { result in
                onQueue.append(DispatchQueue.getSpecific(key: key) == "delivery" ? "queue" : "elsewhere")
                done.record(tag, result)
            }
        }
        let gate = TestGate()
        manager.add(task: TaskManagerTestTask<Int>("ok") { _ in 1 }, completeOn: queue, completion: completion(1))
        manager.add(
            task: TaskManagerTestTask<Int>("failed") { _ in throw TaskManagerTestError(code: 9) },
            completeOn: queue, completion: completion(2)
        )
        manager.add(task: TaskManagerTestTask<Int>("discarded") { _ in 3 }, completeOn: queue, completion: completion(3))
        let cancelled = manager.add(
            task: TaskManagerTestTask<Int>("cancelled") { _ in await gate.wait(); return 4 },
            completeOn: queue, completion: completion(4)
        )
        manager.add(
            task: TaskManagerTestTask<Int>("timedOut") { _ in try await clock.sleep(for: .seconds(100)); return 5 },
            timeout: .seconds(1), completeOn: queue, completion: completion(5)
        )
        await gate.waitForArrivals(1)
        cancelled.cancel()
        await clock.waitForSleepers(count: 2)
        clock.advance(by: .seconds(1))
        await done.waitFor(5)
        #expect(onQueue.all == Array(repeating: "queue", count: 5))
        #expect(tmDescribe(done.result(1)) == "success(1)")
        #expect(tmDescribe(done.result(2)) == "failure(TaskManagerTestError(code: 9))")
        #expect(tmDescribe(done.result(3)) == "discarded")
        #expect(tmDescribe(done.result(4)) == "cancelled")
        #expect(tmDescribe(done.result(5)) == "timedOut")
        gate.open()
    }

    @Test func waitTillAllTasksFinishedReturnsOnlyAfterEveryCompletionReturned() async throws {
        let queue = DispatchQueue(label: "TaskManagerDeliveryTests.suspended")
        queue.suspend()
        let manager = TaskManager()
        let done = TaskManagerTestCompletions<Int>()
        manager.add(task: TaskManagerTestTask<Int> { _ in 1 }, completeOn: queue, completion: done.callback(1))
        let finished = LockedState(false)
        let waiter = Task {
            await manager.waitTillAllTasksFinished()
            finished.withLock { $0 = true }
        }
        // The task itself has finished; its completion waits on the suspended queue.
        await eventually("task finished, waiter stored") {
            manager.inspect { $0.unfinishedCount == 0 && $0.waiterCount == 1 }
        }
        #expect(manager.inspect { $0.pendingDeliveries } == 1)
        #expect(finished.withLock { $0 } == false)
        #expect(done.count == 0)
        queue.resume()
        try await waiter.boundedValue()
        #expect(done.count == 1)
        #expect(manager.inspect { $0.pendingDeliveries } == 0)
    }

    @Test func userCodeRunsOutsideTheLockAndMayCallBackIntoTheManager() async throws {
        let managerBox = LockedState<TaskManager?>(nil)
        @Sendable func reenter() {
            guard let manager = managerBox.withLock({ $0 }) else { return }
            let probe = manager.add(task: TaskManagerTestTask<Int>("probe") { _ in 0 }, startImmediately: false)
            _ = probe.state
            probe.cancel()
        }
        let interceptor = TaskManagerTestInterceptor { name, _ in
            if name != "probe" { reenter() }
            return name == "discarded" ? .discard : .execute
        }
        let reactor = TaskManagerTestReactor { result, name in
            reenter()
            return name == "reacts"
        } work: { _ in
            reenter()
        }
        let manager = TaskManager(interceptors: [interceptor], reactors: [reactor])
        managerBox.withLock { $0 = manager }
        defer { managerBox.withLock { $0 = nil } }  // the box and the manager hold each other
        let done = TaskManagerTestCompletions<Int>()
        let gate = TestGate()

        final class TaskManagerReentrantTask: ManagedTask, TaskManagerTestNamed {
            typealias SuccessValue = Int
            let name: String
            let gate: TestGate
            let reenter: @Sendable () -> Void
            init(_ name: String, gate: TestGate, reenter: @escaping @Sendable () -> Void) {
                self.name = name
                self.gate = gate
                self.reenter = reenter
            }
            func execute() async throws -> Int {
                if name == "cancelled" { await gate.wait() }
                return 1
            }
            func didCancel(with error: TaskError) { reenter() }
        }

        let completion: @Sendable (Int) -> @Sendable (Result<Int, any Error>) -> Void = { tag in
            { result in
                reenter()
                done.record(tag, result)
            }
        }
        manager.add(task: TaskManagerReentrantTask("plain", gate: gate, reenter: reenter), completion: completion(1))
        manager.add(task: TaskManagerReentrantTask("reacts", gate: gate, reenter: reenter), completion: completion(2))
        manager.add(task: TaskManagerReentrantTask("discarded", gate: gate, reenter: reenter), completion: completion(3))
        let cancelled = manager.add(
            task: TaskManagerReentrantTask("cancelled", gate: gate, reenter: reenter), completion: completion(4)
        )
        await gate.waitForArrivals(1)
        cancelled.cancel()
        await done.waitFor(4)
        #expect(tmDescribe(done.result(1)) == "success(1)")
        #expect(tmDescribe(done.result(2)) == "success(1)")
        #expect(tmDescribe(done.result(3)) == "discarded")
        #expect(tmDescribe(done.result(4)) == "cancelled")
        #expect(reactor.runs.count == 1)
        gate.open()
        await manager.waitTillAllTasksFinished()
    }
}
