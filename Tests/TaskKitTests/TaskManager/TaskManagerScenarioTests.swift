import Dispatch
import Testing
@testable import TaskKit
import TaskKitTestSupport
import TaskKitTesting

/// The seed's scenarios on a real manager: batching analytics events, requeueing requests after
/// a token refresh, a reactor that times out, and retrying through a reactor. Time the library
/// owns runs on a `ManualClock`.
@Suite struct TaskManagerScenarioTests {
    // MARK: Analytics batching

    @Test func anAnalyticsInterceptorSendsEventsInBatches() async throws {
        let sent = TaskManagerTestLog<String>()
        let batcher = TaskManagerTestAnalyticsBatcher(batchSize: 5)
        let manager = TaskManager(interceptors: [batcher])
        let done = TaskManagerTestCompletions<String>()
        var handles: [TaskHandle] = []
        for index in 0..<12 {
            let event = TaskManagerTestAnalyticsEvent(name: "e\(index)", sent: sent)
            handles.append(manager.add(task: event, completion: done.callback(index)))
        }
        // Two full batches went out; two events wait in the third.
        await done.waitFor(10)
        #expect(batcher.seenBatchCounts.all == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1])
        #expect(Set(sent.all) == Set((0..<10).map { "e\($0)" }))
        #expect(manager.inspect { $0.batchCount(of: 0) } == 2)
        #expect(handles[10].state == .pending)
        #expect(handles[11].state == .pending)
        // A flush (`forceExecute`) sends the rest without waiting for a full batch.
        let flush = TaskManagerTestAnalyticsEvent(name: "flush", sent: sent, flush: true)
        #expect(try await manager.value(of: flush) == "flush")
        await done.waitFor(12)
        await manager.waitTillAllTasksFinished()
        #expect(Set(sent.all) == Set((0..<12).map { "e\($0)" } + ["flush"]))
        #expect(done.results.allSatisfy { (try? $0.result.get()) != nil })
        #expect(manager.inspect { $0.isIdle })
    }

    // MARK: Requeue after a token refresh

    @Test func requestsFailingWithAnExpiredTokenAreRequeuedAfterOneRefresh() async throws {
        let tokens = TaskManagerTestTokenStore(token: "expired")
        let refreshGate = TestGate()
        // The refresh is held until the test opens the gate, after the steps below.
        let refresher = TaskManagerTestRefreshReactor(tokens: tokens) { await refreshGate.wait() }
        let manager = TaskManager(reactors: [refresher])
        let firstRunGate = TestGate()
        let done = TaskManagerTestCompletions<Int>()
        var requests: [TaskManagerTestRequest] = []
        // Twenty requests all execute with the expired token before any of them fails.
        for index in 0..<20 {
            let request = TaskManagerTestRequest(tokens: tokens, firstRunGate: firstRunGate)
            requests.append(request)
            manager.add(task: request, completion: done.callback(index))
        }
        await firstRunGate.waitForArrivals(20)
        firstRunGate.open()
        // One refresh; the nineteen other failures join it instead of starting another.
        await eventually("all failures joined the refresh") {
            manager.inspect { $0.reactionTasks(of: 0).count } == 20
        }
        // The reactor's `execute` starts on its own task: joining the reaction (above) can come
        // first. Wait for it to start, then check that it is the only one.
        await eventually("the refresh started") { refresher.runs.count >= 1 }
        #expect(refresher.runs.count == 1)
        #expect(manager.inspect { $0.isSuspended })
        // Requests added during the refresh wait (suspendsTaskQueue) and are not executed yet.
        var late: [TaskManagerTestRequest] = []
        for index in 20..<25 {
            let request = TaskManagerTestRequest(tokens: tokens, firstRunGate: nil)
            late.append(request)
            manager.add(task: request, completion: done.callback(index))
        }
        for _ in 0..<100 { await Task.yield() }
        #expect(late.allSatisfy { $0.attempts.count == 0 })
        #expect(done.count == 0)
        refreshGate.open()
        await done.waitFor(25)
        await manager.waitTillAllTasksFinished()
        #expect(done.results.map { tmDescribe($0.result) }.allSatisfy { $0 == "success(200)" })
        #expect(requests.allSatisfy { $0.attempts.all == ["expired", "fresh"] })
        #expect(late.allSatisfy { $0.attempts.all == ["fresh"] })
        #expect(refresher.runs.count == 1)
        #expect(manager.inspect { $0.isIdle })
    }

    @Test func aFailedRefreshFailsTheRequestsItWasToRequeueWithTheTypedError() async throws {
        let tokens = TaskManagerTestTokenStore(token: "expired")
        let refresher = TaskManagerTestRefreshReactor(tokens: tokens) { throw TaskManagerTestError(code: 401) }
        let manager = TaskManager(reactors: [refresher])
        let request = TaskManagerTestRequest(tokens: tokens, firstRunGate: nil)
        await #expect {
            try await manager.value(of: request)
        } throws: { error in
            guard case TaskError.reactorFailed(let type, let underlying) = error else { return false }
            return type == TaskManagerTestRefreshReactor.self
                && (underlying as? TaskManagerTestError) == TaskManagerTestError(code: 401)
        }
        #expect(request.cancellations.all.count == 1)
        #expect(request.attempts.all == ["expired"])
        #expect(manager.inspect { $0.isIdle })
    }

    // MARK: Reactor timeout

    @Test func aRefreshThatTimesOutFailsItsRequestsAndIsCancelled() async throws {
        let clock = ManualClock()
        let tokens = TaskManagerTestTokenStore(token: "expired")
        let observed = TaskManagerTestLog<String>()
        let refresher = TaskManagerTestRefreshReactor(tokens: tokens, timeout: .seconds(5)) {
            do {
                try await clock.sleep(for: .seconds(1_000))
            } catch {
                observed.append("\(type(of: error))")
                throw error
            }
        }
        let manager = TaskManager(reactors: [refresher], clock: clock)
        let done = TaskManagerTestCompletions<Int>()
        let firstRunGate = TestGate()
        let requests = (0..<3).map { _ in TaskManagerTestRequest(tokens: tokens, firstRunGate: firstRunGate) }
        for (index, request) in requests.enumerated() {
            manager.add(task: request, completion: done.callback(index))
        }
        await firstRunGate.waitForArrivals(3)
        firstRunGate.open()
        // The reaction's timer and its work both sleep on the clock.
        await clock.waitForSleepers(count: 2)
        await eventually("all three joined") { manager.inspect { $0.reactionTasks(of: 0).count } == 3 }
        clock.advance(by: .seconds(4))
        #expect(done.count == 0)
        clock.advance(by: .seconds(1))
        await done.waitFor(3)
        for index in 0..<3 {
            guard case .failure(let error)? = done.result(index), case TaskError.reactorTimedOut(let type) = error else {
                Issue.record("request \(index): \(tmDescribe(done.result(index)))")
                continue
            }
            #expect(ObjectIdentifier(type) == ObjectIdentifier(TaskManagerTestRefreshReactor.self))
        }
        #expect(requests.allSatisfy { $0.cancellations.all.count == 1 })
        await eventually("the reaction's work was cancelled") { observed.count == 1 }
        #expect(observed.all == ["CancellationError"])
        #expect(tokens.token == "expired")
        await manager.waitTillAllTasksFinished()
        #expect(manager.inspect { $0.isIdle })
    }

    // MARK: Retry

    @Test func aRetryReactorRunsAFlakyTaskAgainAfterABackoffOnTheClock() async throws {
        let clock = ManualClock()
        let retry = TaskManagerTestRetryReactor(maxAttempts: 3, backoff: .seconds(2), clock: clock)
        let manager = TaskManager(reactors: [retry], clock: clock)
        let flaky = TaskManagerTestTask<Int>("flaky") { task in
            if task.executions.count < 3 { throw TaskManagerTestError(code: task.executions.count) }
            return 42
        }
        let done = TaskManagerTestCompletions<Int>()
        manager.add(task: flaky, completion: done.callback())
        for attempt in 1...2 {
            await clock.waitForSleepers(count: 1)
            #expect(flaky.executions.count == attempt)
            clock.advance(by: .seconds(1))
            #expect(done.count == 0)
            clock.advance(by: .seconds(1))
        }
        await done.waitFor(1)
        #expect(tmDescribe(done.result(0)) == "success(42)")
        #expect(flaky.executions.count == 3)
        #expect(retry.runs.count == 2)
    }

    @Test func aRetryReactorGivesUpAfterItsLastAttemptAndDeliversTheError() async throws {
        let clock = ManualClock()
        let retry = TaskManagerTestRetryReactor(maxAttempts: 2, backoff: .seconds(1), clock: clock)
        let manager = TaskManager(reactors: [retry], clock: clock)
        let failing = TaskManagerTestTask<Int>("failing") { task in
            throw TaskManagerTestError(code: task.executions.count)
        }
        let done = TaskManagerTestCompletions<Int>()
        manager.add(task: failing, completion: done.callback())
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(1))
        await done.waitFor(1)
        #expect(tmDescribe(done.result(0)) == "failure(TaskManagerTestError(code: 2))")
        #expect(failing.executions.count == 2)
        #expect(failing.cancellations.count == 0)
    }
}

// MARK: - Scenario helpers

/// One analytics event; records that it was sent.
final class TaskManagerTestAnalyticsEvent: ManagedTask, TaskManagerTestNamed {
    typealias SuccessValue = String
    let name: String
    let flush: Bool
    let sent: TaskManagerTestLog<String>

    init(name: String, sent: TaskManagerTestLog<String>, flush: Bool = false) {
        self.name = name
        self.sent = sent
        self.flush = flush
    }

    func execute() async throws -> String {
        sent.append(name)
        return name
    }
}

/// Holds analytics events until `batchSize` are waiting, then releases them; a flush event
/// forces the batch out.
struct TaskManagerTestAnalyticsBatcher: Interceptor {
    let batchSize: Int
    let seenBatchCounts = TaskManagerTestLog<Int>()

    func intercept<T: ManagedTask>(task: inout T, currentBatchCount: Int) -> InterceptCommand {
        guard let event = task as? TaskManagerTestAnalyticsEvent else { return .execute }
        if event.flush { return .forceExecute }
        seenBatchCounts.append(currentBatchCount)
        return currentBatchCount + 1 < batchSize ? .hold : .execute
    }
}

/// The current bearer token.
final class TaskManagerTestTokenStore: Sendable {
    private let state: LockedState<String>
    init(token: String) { state = LockedState(token) }
    var token: String { state.withLock { $0 } }
    func set(_ token: String) { state.withLock { $0 = token } }
}

/// A request that fails with 401 unless the token is fresh; records the token of each attempt.
final class TaskManagerTestRequest: ManagedTask {
    typealias SuccessValue = Int
    let tokens: TaskManagerTestTokenStore
    let firstRunGate: TestGate?
    let attempts = TaskManagerTestLog<String>()
    let cancellations = TaskManagerTestLog<String>()

    init(tokens: TaskManagerTestTokenStore, firstRunGate: TestGate?) {
        self.tokens = tokens
        self.firstRunGate = firstRunGate
    }

    func execute() async throws -> Int {
        let token = tokens.token
        if attempts.count == 0, let firstRunGate { await firstRunGate.wait() }
        attempts.append(token)
        guard token == "fresh" else { throw TaskManagerTestError(code: 401) }
        return 200
    }

    func didCancel(with error: TaskError) { cancellations.append(tmDescribe(error)) }
}

/// Refreshes the token when a request fails with 401; suspends the queue and requeues.
struct TaskManagerTestRefreshReactor: Reactor {
    let tokens: TaskManagerTestTokenStore
    let configuration: ReactorConfiguration
    let refresh: @Sendable () async throws -> Void
    let runs = TaskManagerTestLog<Int>()

    init(
        tokens: TaskManagerTestTokenStore, timeout: Duration? = nil,
        refresh: @escaping @Sendable () async throws -> Void
    ) {
        self.tokens = tokens
        self.refresh = refresh
        self.configuration = ReactorConfiguration(timeout: timeout, requeuesTask: true, suspendsTaskQueue: true)
    }

    func shouldExecute<T: ManagedTask>(
        after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
    ) -> Bool {
        if case .failure(let error as TaskManagerTestError) = result { return error.code == 401 }
        return false
    }

    func execute() async throws {
        runs.append(runs.count + 1)
        try await refresh()
        tokens.set("fresh")
    }
}

/// Retries a failed task after `backoff` (on `clock`) until it has run `maxAttempts` times.
struct TaskManagerTestRetryReactor<C: Clock<Duration>>: Reactor {
    let maxAttempts: Int
    let backoff: Duration
    let clock: C
    let runs = TaskManagerTestLog<Int>()

    var configuration: ReactorConfiguration { ReactorConfiguration(requeuesTask: true) }

    func shouldExecute<T: ManagedTask>(
        after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
    ) -> Bool {
        guard case .failure = result, let task = task as? TaskManagerTestTask<Int> else { return false }
        return task.executions.count < maxAttempts
    }

    func execute() async throws {
        runs.append(runs.count + 1)
        try await clock.sleep(for: backoff)
    }
}
