import Dispatch
import Testing
@testable import TaskKit
import TaskKitTestSupport

/// Interceptors on a real manager: verdicts, batches, and terminations during interception.
@Suite struct TaskManagerInterceptionTests {
    @Test func aDiscardedTaskCompletesItsCallerWithDiscarded() async throws {
        let interceptor = TaskManagerTestInterceptor { name, _ in name == "drop" ? .discard : .execute }
        let manager = TaskManager(interceptors: [interceptor])
        let dropped = TaskManagerTestTask<Int>("drop") { _ in 1 }
        await #expect {
            try await manager.value(of: dropped)
        } throws: { error in
            if case TaskError.discarded = error { return true }
            return false
        }
        #expect(dropped.cancellations.all == ["discarded"])
        #expect(dropped.executions.count == 0)
        #expect(try await manager.value(of: TaskManagerTestTask<Int>("keep") { _ in 2 }) == 2)
        await manager.waitTillAllTasksFinished()
        #expect(manager.inspect { $0.isIdle })
    }

    @Test func aTaskCancelledWhileItIsBeingInterceptedCompletesItsCaller() async throws {
        // The interceptor cancels the task it is looking at (through a handle built from the
        // identifier the manager is about to return): the cancel arrives mid-interception.
        let managerBox = LockedState<TaskManager?>(nil)
        let interceptor = TaskManagerTestInterceptor { name, _ in
            if name == "self-cancel", let manager = managerBox.withLock({ $0 }) {
                TaskHandle(identifier: 1, storage: manager.storage).cancel()
            }
            return .execute
        }
        let manager = TaskManager(interceptors: [interceptor])
        managerBox.withLock { $0 = manager }
        defer { managerBox.withLock { $0 = nil } }  // the box and the manager hold each other
        let done = TaskManagerTestCompletions<Int>()
        let task = TaskManagerTestTask<Int>("self-cancel") { _ in 1 }
        let handle = manager.add(task: task, completion: done.callback())
        #expect(handle.identifier == 1)
        await done.waitFor(1)
        #expect(tmDescribe(done.result(0)) == "cancelled")
        #expect(task.cancellations.all == ["cancelled"])
        #expect(task.executions.count == 0)
        #expect(handle.state == .finished)
        await manager.waitTillAllTasksFinished()
        #expect(manager.inspect { $0.isIdle })
    }
}
