import Testing
@testable import TaskKit
import TaskKitTestSupport

/// A reactor that only decides.
@Suite(.timeLimit(.minutes(1))) struct TaskManagerClosureTaskTests {
    // MARK: A reactor that only decides

    /// Implements `shouldExecute` and neither form of `execute`.
    struct RequeueOnce: Reactor {
        let seen = TaskManagerTestLog<Int>()
        var configuration: ReactorConfiguration { ReactorConfiguration(requeuesTask: true) }

        func shouldExecute<T: ManagedTask>(
            after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
        ) -> Bool {
            seen.append(1)
            return seen.count == 1
        }
    }

    @Test func aReactorThatOnlyDecidesRequeuesWithoutSideWork() async throws {
        let reactor = RequeueOnce()
        let manager = TaskManager(reactors: [reactor])
        let task = TaskManagerTestTask<Int> { task in task.executions.count }
        #expect(try await manager.value(of: task) == 2)
        #expect(task.executions.count == 2)
        #expect(reactor.seen.count == 2)
    }

    @Test func theDefaultReactionsSucceedAtOnce() async throws {
        let reactor = RequeueOnce()
        try await reactor.execute()
        let error = await awaitCallback { (done: @escaping @Sendable ((any Error)?) -> Void) in
            reactor.execute(done: done)
        }
        #expect(error == nil)
    }
}
