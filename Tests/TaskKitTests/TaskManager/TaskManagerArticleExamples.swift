import Dispatch
import Testing
import TaskKit
import TaskKitTestSupport
import TaskKitTesting

// The examples of UsingTaskManager.md, kept compiling and running here. The types are nested in
// this namespace (the article shows them at top level); the code is otherwise the same.
enum TaskManagerArticleExamples {
    // MARK: Tasks and handles

    /// Counts the pixels of an RGBA buffer (stands in for real decoding work).
    final class DecodeImage: ManagedTask {
        typealias SuccessValue = Int
        let bytes: [UInt8]

        init(bytes: [UInt8]) { self.bytes = bytes }

        func execute() async throws -> Int {
            try Task.checkCancellation()
            return bytes.count / 4
        }
    }

    /// Wraps a completion-handler API.
    final class LegacyFetch: CallbackManagedTask {
        typealias SuccessValue = String
        let path: String

        init(path: String) { self.path = path }

        func execute(completion: @escaping @Sendable (Result<String, any Error>) -> Void) {
            DispatchQueue.global().async {
                completion(.success("contents of \(self.path)"))
            }
        }

        func didCancel(with error: TaskError) {
            // Stop the underlying request here; the manager completes the caller itself.
        }
    }

    // MARK: Interceptors

    /// One analytics event, sent on its own when executed.
    final class AnalyticsEvent: ManagedTask {
        typealias SuccessValue = Void
        let name: String
        let sink: @Sendable (String) -> Void

        init(name: String, sink: @escaping @Sendable (String) -> Void) {
            self.name = name
            self.sink = sink
        }

        func execute() async throws { sink(name) }
    }

    /// Holds events until `batchSize` of them are waiting, then lets the whole batch go.
    struct AnalyticsBatcher: Interceptor {
        let batchSize: Int

        func intercept<T: ManagedTask>(task: inout T, currentBatchCount: Int) -> InterceptCommand {
            // `currentBatchCount` events are held already; this one completes the batch or waits.
            currentBatchCount + 1 < batchSize ? .hold : .execute
        }
    }

    // MARK: Reactors

    enum APIError: Error { case unauthorized }

    /// The access token, and the "server" that accepts any token a refresh issued.
    actor TokenStore {
        private(set) var current = "expired"
        private(set) var refreshes = 0

        func isAccepted(_ token: String) -> Bool { token != "expired" }

        func refresh() async throws {
            refreshes += 1
            current = "token-\(refreshes)"
        }
    }

    /// A request signed with the current token; the server rejects the expired one.
    final class ProfileRequest: ManagedTask {
        typealias SuccessValue = String
        let tokens: TokenStore

        init(tokens: TokenStore) { self.tokens = tokens }

        func execute() async throws -> String {
            let token = await tokens.current
            guard await tokens.isAccepted(token) else { throw APIError.unauthorized }
            return "profile"
        }
    }

    /// Refreshes the token when a request is rejected, holding back other requests meanwhile,
    /// then runs the rejected requests again.
    struct RefreshTokenReactor: Reactor {
        let tokens: TokenStore

        var configuration: ReactorConfiguration {
            ReactorConfiguration(timeout: .seconds(10), requeuesTask: true, suspendsTaskQueue: true)
        }

        func shouldExecute<T: ManagedTask>(
            after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
        ) -> Bool {
            if case .failure(APIError.unauthorized) = result { return true }
            return false
        }

        func execute() async throws {
            try await tokens.refresh()
        }
    }
}

@Suite struct TaskManagerArticleExampleTests {
    typealias Example = TaskManagerArticleExamples

    @Test func handlesAddStartCancelAndState() async throws {
        let manager = TaskManager()

        // Add with a completion; the handle identifies the task and reports its state.
        let decoded = TaskManagerTestCompletions<Int>()
        let handle = manager.add(task: Example.DecodeImage(bytes: Array(repeating: 0, count: 64))) { result in
            decoded.record(0, result)
        }
        #expect(handle.identifier == 1)
        await decoded.waitFor(1)
        #expect(try decoded.result(0)?.get() == 16)
        #expect(handle.state == .finished)

        // Add now, start later; cancel before the start wins.
        let later = manager.add(task: Example.LegacyFetch(path: "/a"), startImmediately: false)
        #expect(later.state == .pending)
        later.start()
        later.start()  // harmless
        let never = manager.add(task: Example.LegacyFetch(path: "/b"), startImmediately: false)
        never.cancel()
        never.start()
        #expect(never.state == .finished)

        // Or await the value.
        let pixels = try await manager.value(of: Example.DecodeImage(bytes: Array(repeating: 0, count: 8)))
        #expect(pixels == 2)
        #expect(try await manager.value(of: Example.LegacyFetch(path: "/c")) == "contents of /c")
        await manager.waitTillAllTasksFinished()
    }

    @Test func delayedStartAndTimeout() async throws {
        let clock = ManualClock()
        let manager = TaskManager(clock: clock)
        let done = TaskManagerTestCompletions<Int>()
        manager.add(task: Example.DecodeImage(bytes: [0, 0, 0, 0]), after: .seconds(30), completion: done.callback(1))
        manager.add(
            task: TaskManagerTestTask<Int> { _ in
                try await clock.sleep(for: .seconds(60))
                return 0
            },
            timeout: .seconds(5)
        ) { result in
            done.record(2, result)
        }
        await clock.waitForSleepers(count: 3)  // the delay, the deadline and the slow body
        clock.advance(by: .seconds(5))
        await done.waitFor(1)
        #expect(tmDescribe(done.result(2)) == "timedOut")
        clock.advance(by: .seconds(25))
        await done.waitFor(2)
        #expect(try done.result(1)?.get() == 1)
    }

    @Test func analyticsBatching() async throws {
        let sent = TaskManagerTestLog<String>()
        let analytics = TaskManager(interceptors: [Example.AnalyticsBatcher(batchSize: 5)])
        let handles = (1...12).map { index in
            analytics.add(task: Example.AnalyticsEvent(name: "screen_view_\(index)") { sent.append($0) })
        }
        // Events 1–10 went out in two batches of five; 11 and 12 are held.
        await eventually("two batches sent") { sent.count == 10 }
        #expect(handles[10].state == .pending)
        #expect(handles[11].state == .pending)
        #expect(Set(sent.all) == Set((1...10).map { "screen_view_\($0)" }))
        for handle in handles[10...] { handle.cancel() }
        await analytics.waitTillAllTasksFinished()
    }

    @Test func refreshTokenReactor() async throws {
        let tokens = Example.TokenStore()
        let api = TaskManager(reactors: [Example.RefreshTokenReactor(tokens: tokens)])
        let profiles = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<10 {
                group.addTask { try await api.value(of: Example.ProfileRequest(tokens: tokens)) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(profiles == Array(repeating: "profile", count: 10))
        let refreshes = await tokens.refreshes
        #expect(refreshes >= 1)
        #expect(refreshes <= 10)
    }

    @Test func callbackBridges() async throws {
        let five = await awaitCallback { (done: @escaping @Sendable (Int) -> Void) in
            DispatchQueue.global().async { done(5) }
        }
        #expect(five == 5)

        await awaitCallback { (done: @escaping @Sendable () -> Void) in
            DispatchQueue.global().async { done() }
        }

        let text = try await awaitCallback { (done: @escaping @Sendable (Result<String, any Error>) -> Void) in
            DispatchQueue.global().async { done(.success("ok")) }
        }
        #expect(text == "ok")
    }
}
