import Dispatch
import Testing
@testable import TaskKit

/// The lock-free hand-over of an execution's Swift task between the thread that spawned it and
/// the thread that cancels it (`AnyTaskBox.publishExecution` / `cancelExecution`).
@Suite struct TaskManagerTaskBoxTests {
    static func box() -> TaskBox<TaskManagerTestTask<Int>> {
        TaskBox(task: TaskManagerTestTask<Int> { _ in 0 }, timeout: nil, queue: nil, completion: nil)
    }

    static func idleJob() -> Task<Void, Never> {
        Task { try? await Task.sleep(for: .seconds(3_600)) }
    }

    @Test func aPublishedExecutionIsCancelled() async {
        let box = Self.box()
        let job = Self.idleJob()
        box.publishExecution(job)
        #expect(!job.isCancelled)
        box.cancelExecution()
        #expect(job.isCancelled)
    }

    @Test func anExecutionPublishedAfterTheCancelIsCancelledAtOnce() async {
        let box = Self.box()
        box.cancelExecution()
        let job = Self.idleJob()
        box.publishExecution(job)
        #expect(job.isCancelled)
    }

    @Test func onlyTheLatestAttemptIsCancelled() async {
        let box = Self.box()
        let first = Self.idleJob()
        let second = Self.idleJob()
        box.publishExecution(first)
        box.publishExecution(second)
        box.cancelExecution()
        #expect(second.isCancelled)
        #expect(!first.isCancelled)
        first.cancel()
    }

    @Test func concurrentPublishAndCancelAlwaysCancelTheJob() async {
        let jobs = (0..<2_000).map { _ in (Self.box(), Self.idleJob(), Self.idleJob()) }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for (box, first, second) in jobs {
                    box.publishExecution(first)
                    box.publishExecution(second)
                }
            }
            group.addTask {
                for (box, _, _) in jobs { box.cancelExecution() }
            }
        }
        for (_, first, second) in jobs {
            #expect(second.isCancelled)
            first.cancel()
        }
    }
}
