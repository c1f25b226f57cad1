import Dispatch
import Testing
import TaskKitTestSupport
@testable import TaskKit

/// The lock-free hand-over of an execution's Swift task between the thread that spawned it and
/// the thread that cancels it (`AnyTaskBox.publishExecution` / `cancelExecution`).
@Suite struct TaskManagerTaskBoxTests {
    static func box() -> TaskBox<TaskManagerTestTask<Int>> {
        TaskBox(task: TaskManagerTestTask<Int> { _ in 0 }, timeout: nil, queue: nil, completion: nil) { _, _ in }
    }

    static func idleJob() -> Task<Void, any Error> {
        Task { () async throws -> Void in try? await Task.sleep(for: .seconds(3_600)) }
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

    // MARK: The awaited box (`value(of:)`)

    static func awaitedBox(_ value: Int) -> TaskBox<TaskManagerTestTask<Int>> {
        TaskBox(awaiting: TaskManagerTestTask<Int> { _ in value }, timeout: nil)
    }

    @Test func anAnswerBeforeTheAwaitIsReturnedAtOnce() async throws {
        let box = Self.awaitedBox(7)
        _ = await box.run(adapters: [])
        box.deliverResult {}
        #expect(try await box.awaitValue() == 7)
    }

    @Test func anAnswerAfterTheAwaitResumesIt() async throws {
        let box = Self.awaitedBox(8)
        let waiter = Task { try await box.awaitValue() }
        await eventually("the caller waits for the answer") { box.callerIsWaiting }
        _ = await box.run(adapters: [])
        box.deliverResult {}
        #expect(try await waiter.boundedValue() == 8)
    }

    @Test func onlyTheFirstAnswerCounts() async throws {
        let box = Self.awaitedBox(9)
        _ = await box.run(adapters: [])
        box.deliverResult {}
        box.terminate(with: .cancelled) {}
        #expect(try await box.awaitValue() == 9)
        let ended = Self.awaitedBox(10)
        ended.terminate(with: .timedOut) {}
        _ = await ended.run(adapters: [])
        ended.deliverResult {}
        await #expect(throws: TaskError.self) { try await ended.awaitValue() }
    }

    @Test func aTypedAnswerReachesItsAwaitInEitherOrderAndOnlyTheFirstCounts() async throws {
        let early = Self.awaitedBox(0)
        early.answerAwaiter(with: .success(11))
        early.terminate(with: .cancelled) {}
        #expect(try await early.awaitValue() == 11)

        let late = Self.awaitedBox(0)
        let waiter = Task { try await late.awaitValue() }
        await eventually("the caller waits for the answer") { late.callerIsWaiting }
        late.answerAwaiter(with: .failure(TaskManagerTestError(code: 4)))
        late.answerAwaiter(with: .success(12))
        await #expect(throws: TaskManagerTestError(code: 4)) { try await waiter.boundedValue() }

        let ended = Self.awaitedBox(0)
        ended.terminate(with: .timedOut) {}
        ended.answerAwaiter(with: .success(13))
        let error = await #expect(throws: TaskError.self) { try await ended.awaitValue() }
        #expect(error.map(tmDescribe) == "timedOut")
    }

    /// `typed`: answered as the direct lane answers (``TaskBox/answerAwaiter(with:)``), else as
    /// the general lane (``TaskBox/deliverResult(then:)``).
    @Test(arguments: [false, true])
    func everyAnswerRacingItsAwaitIsReceivedOnce(typed: Bool) async throws {
        let boxes = (0..<2_000).map { Self.awaitedBox($0) }
        if !typed {
            for box in boxes { _ = await box.run(adapters: []) }
        }
        let returned = LockedState(0)
        let sum = try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask {
                for (index, box) in boxes.enumerated() {
                    if typed {
                        box.answerAwaiter(with: .success(index))
                        returned.withLock { $0 += 1 }
                    } else {
                        box.deliverResult { returned.withLock { $0 += 1 } }
                    }
                }
                return 0
            }
            for box in boxes { group.addTask { try await box.awaitValue() } }
            return try await group.reduce(0, +)
        }
        #expect(sum == (0..<2_000).reduce(0, +))
        #expect(returned.withLock { $0 } == 2_000)
    }
}

extension TaskBox {
    /// Whether the caller of ``awaitValue()`` is suspended, waiting for the answer: the order
    /// the tests of the caller-first hand-over need, without sleeping for it.
    var callerIsWaiting: Bool { handOver.load(ordering: .acquiring) == Self.waiting }
}
