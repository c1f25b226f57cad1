import Dispatch
import Logging
import Testing
@testable import TaskKit
import TaskKitTestSupport
import TaskKitTesting

/// The Tasker README's examples in their TaskKit form, one test per row of "Migrating from
/// Tasker" (TaskKit.docc/MigratingFromTasker.md).
@Suite(.scaledTimeLimit(minutes: 1)) struct MigratingFromTaskerTests {
    /// The README's `MyTask`, with its URL request replaced by a local callback.
    final class MyTask: CallbackManagedTask {
        typealias SuccessValue = String
        func execute(completion: @escaping @Sendable (Result<String, any Error>) -> Void) {
            DispatchQueue.global().async { completion(.success("response")) }
        }
    }

    /// The README's `DecodeImage`, recording `didCancel`.
    final class DecodeImage: ManagedTask {
        let cancellations = TaskManagerTestLog<String>()
        let started = TestGate()
        func execute() async throws -> Int {
            await started.wait()
            try await Task.sleep(for: .seconds(3600))
            return 1
        }
        func didCancel(with error: TaskError) { cancellations.append(tmDescribe(error)) }
    }

    @available(*, deprecated, message: "exercises Tasker's TaskManager.shared")
    @Test func quickLookAwaitAsyncAndTaskManager() async throws {
        // Await: `try MyTask().await()`.
        #expect(try await TaskManager.shared.value(of: MyTask()) == "response")
        // Async / TaskManager: `MyTask().async { … }`, `TaskManager.shared.add(task:) { … }`.
        let done = TaskManagerTestCompletions<String>()
        TaskManager.shared.add(task: MyTask()) { result in done.record(0, result) }
        await done.waitFor(1)
        #expect(tmDescribe(done.result(0)) == "success(response)")
    }

    @Test func startingLaterOrAfterADelay() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let done = TaskManagerTestCompletions<String>()
        let handle = manager.add(task: MyTask(), startImmediately: false, completion: done.callback(1))
        #expect(handle.state == .pending)
        handle.start()
        await done.waitFor(1)
        manager.add(task: MyTask(), after: .seconds(30), completion: done.callback(2))
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(30))
        await done.waitFor(2)
        #expect(done.count == 2)
        #expect(handle.identifier >= 1)
    }

    @Test func cancellingATaskCallsDidCancelWithCancelled() async throws {
        let manager = TaskManager()
        let task = DecodeImage()
        let done = TaskManagerTestCompletions<Int>()
        let handle = manager.add(task: task, completion: done.callback())
        await task.started.waitForArrivals(1)
        handle.cancel()
        await done.waitFor(1)
        #expect(tmDescribe(done.result(0)) == "cancelled")
        #expect(task.cancellations.all == ["cancelled"])
        task.started.open()
    }

    @Test func awaitWithATimeout() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let task = DecodeImage()
        let outcome = Task { try await manager.value(of: task, timeout: .seconds(1)) }
        await task.started.waitForArrivals(1)
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(1))
        #expect(tmDescribe(await outcome.result) == "timedOut")
        #expect(task.cancellations.all == ["timedOut"])
        task.started.open()
    }

    /// The README's interceptor, adding a header to a request-like task, and batching.
    struct AddsAuthorization: Interceptor {
        func intercept<T: ManagedTask>(task: inout T, currentBatchCount: Int) -> InterceptCommand {
            guard let request = task as? TaskManagerTestTask<Int> else { return .execute }
            request.headers.withLock { $0.append("Authorization: token") }
            return currentBatchCount < 1 ? .hold : .execute
        }
    }

    @Test func interceptingWithBatches() async throws {
        let manager = TaskManager(interceptors: [AddsAuthorization()])
        let first = TaskManagerTestTask<Int> { task in task.headers.withLock { $0.count } }
        let second = TaskManagerTestTask<Int> { task in task.headers.withLock { $0.count } }
        let done = TaskManagerTestCompletions<Int>()
        manager.add(task: first, completion: done.callback(1))
        manager.add(task: second, completion: done.callback(2))
        await done.waitFor(2)
        #expect(tmDescribe(done.result(1)) == "success(1)")
        #expect(tmDescribe(done.result(2)) == "success(1)")
    }

    /// The README's reactor in callback form: refresh something, then requeue the task.
    struct RefreshThenRequeue: CallbackReactor {
        let refreshes = TaskManagerTestLog<Int>()
        var configuration: ReactorConfiguration { ReactorConfiguration(requeuesTask: true, reinterceptOnRequeue: true) }
        func execute(done: @escaping @Sendable ((any Error)?) -> Void) {
            refreshes.append(1)
            DispatchQueue.global().async { done(nil) }
        }
        func shouldExecute<T: ManagedTask>(
            after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
        ) -> Bool {
            (try? result.get()) as? Int == 401
        }
    }

    @Test func reactingAndRequeueing() async throws {
        let reactor = RefreshThenRequeue()
        let manager = TaskManager(reactors: [reactor])
        let task = TaskManagerTestTask<Int> { task in task.executions.count == 1 ? 401 : 200 }
        #expect(try await manager.value(of: task) == 200)
        #expect(reactor.refreshes.count == 1)
    }

    @Test func awaitFreeFunctionOverClosures() async throws {
        let number = await awaitCallback { (done: @escaping @Sendable (Int) -> Void) in
            DispatchQueue.global().async { done(5) }
        }
        #expect(number == 5)
        let timed = try await awaitCallback(timeout: .seconds(30)) { (done: @escaping @Sendable (Int) -> Void) in
            done(6)
        }
        #expect(timed == 6)
    }

    @Test func asyncFreeFunctionOverAnExpression() async throws {
        // `async(loadVideoFileSync()) { result in … }`: a Swift task, or a closure task.
        @Sendable func loadVideoFileSync() throws -> String { "video" }
        let done = TaskManagerTestCompletions<String>()
        let manager = TaskManager()
        manager.add(execute: { try loadVideoFileSync() }, completion: done.callback())
        await done.waitFor(1)
        #expect(tmDescribe(done.result(0)) == "success(video)")
    }

    @Test func anyTaskFromClosuresAndTasks() async throws {
        let manager = TaskManager()
        #expect(try await manager.value(of: AnyTask { 3 }) == 3)
        #expect(try await manager.value(of: AnyTask(fromTask: MyTask())) == "response")
        let callback = AnyTask<Int> { completion in completion(.success(4)) }
        #expect(try await manager.value(of: callback) == 4)
    }

    @Test func loggingThroughSwiftLog() async throws {
        struct Capture: LogHandler {
            let lines: TaskManagerTestLog<String>
            var metadata: Logger.Metadata = [:]
            var logLevel: Logger.Level = .trace
            subscript(metadataKey key: String) -> Logger.Metadata.Value? {
                get { metadata[key] }
                set { metadata[key] = newValue }
            }
            func log(event: LogEvent) { lines.append("\(event.message)") }
        }
        let lines = TaskManagerTestLog<String>()
        let manager = TaskManager(logger: Logger(label: "tasker-port") { _ in Capture(lines: lines) })
        _ = try await manager.value { 1 }
        #expect(lines.count > 0)
    }
}
