#if Examples
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TaskKit

extension Scenario {
    /// TaskManager: an analytics interceptor batching events, and a reactor that refreshes a
    /// token on 401, suspends the queue and requeues the failed requests.
    static let taskManager = Scenario(name: "taskmanager", title: "TaskManager — batching and reacting") { context, record in
        // 1. Analytics: events are held until five are waiting, then released together.
        let batching = AnalyticsBatchingInterceptor(batchSize: 5)
        let analytics = TaskManager(interceptors: [batching])
        let events = 20
        let before = await context.server.analyticsEventCount()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<events {
                let task = AnalyticsEventTask(context: context, name: "screen_view_\(index)")
                group.addTask { _ = try await analytics.value(of: task) }
            }
            try await group.waitForAll()
        }
        let delivered = await context.server.analyticsEventCount() - before
        record.measure("analytics", "\(events) events, released in \(batching.releasedBatches) batches of 5")
        record.expect("events delivered", delivered, equals: events)
        record.expect("batches released by the interceptor", batching.releasedBatches, equals: events / 5)

        // 2. Reactor: requests signed with an expired token get 401; one refresh runs while the
        //    queue is suspended, then the failed requests are requeued and succeed.
        let tokens = TokenBox(token: "expired-token")
        let refresher = RefreshOn401Reactor(context: context, tokens: tokens)
        let api = TaskManager(reactors: [refresher])
        let requests = 10
        let refreshesBefore = await context.server.refreshCount()
        let started = ContinuousClock.now
        let outcomes = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<requests {
                group.addTask {
                    // A closure task: a requeued run calls it again, with the token of that moment.
                    (try? await api.value { try await protectedRequest(context: context, tokens: tokens) }) == 200
                }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        let elapsed = started.duration(to: .now)
        let refreshes = await context.server.refreshCount() - refreshesBefore
        record.measure("reactor", "\(requests) requests with an expired token: \(refreshes) refresh, \(outcomes) succeeded after requeue")
        record.expect("requests that succeeded after the reaction", outcomes, equals: requests)
        record.expect("token refreshes", refreshes, atMost: 2)
        record.expect("token refreshes", refreshes, atLeast: 1)
        await api.waitTillAllTasksFinished()

        // The same requests with the same expired token, each refreshing on its own 401.
        let naive = await measuredRun(context.server, counting: { await $0.refreshCount() }) {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<requests {
                    group.addTask { _ = try? await context.naiveProtectedGet(token: "expired-token") }
                }
            }
        }
        record.compare(
            "taskmanager", workload: "\(requests) concurrent requests, expired token", counted: "POST /token",
            naive: naive, taskKit: Comparison.Run(count: refreshes, seconds: elapsed.seconds)
        )
    }
}

/// Posts one analytics event.
final class AnalyticsEventTask: ManagedTask {
    typealias SuccessValue = Int
    let context: DemoContext
    let name: String

    init(context: DemoContext, name: String) {
        self.context = context
        self.name = name
    }

    func execute() async throws -> Int {
        let body = Data(#"[{"event":"\#(name)"}]"#.utf8)
        let (_, response) = try await context.fetch("/analytics", method: "POST", body: body)
        return response.statusCode
    }
}

/// Holds analytics events until `batchSize` are waiting, then releases them together.
final class AnalyticsBatchingInterceptor: Interceptor {
    let batchSize: Int
    private let released = LockedState(0)

    init(batchSize: Int) {
        self.batchSize = batchSize
    }

    var releasedBatches: Int { released.withLock { $0 } }

    func intercept<T: ManagedTask>(task: inout T, currentBatchCount: Int) -> InterceptCommand {
        guard task is AnalyticsEventTask else { return .execute }
        if currentBatchCount + 1 < batchSize { return .hold }
        released.withLock { $0 += 1 }
        return .execute
    }
}

/// The current bearer token, shared by requests and the refresher.
final class TokenBox: Sendable {
    private let state: LockedState<String>
    init(token: String) { state = LockedState(token) }
    var token: String {
        get { state.withLock { $0 } }
    }
    func set(_ token: String) { state.withLock { $0 = token } }
}

/// GET /protected with the current token; a 401 is reported as an error for the reactor.
func protectedRequest(context: DemoContext, tokens: TokenBox) async throws -> Int {
    var request = URLRequest(url: context.server.url("/protected"))
    request.setValue("Bearer \(tokens.token)", forHTTPHeaderField: "Authorization")
    let (_, response) = try await DemoContext.session.data(for: request)
    let status = (response as? HTTPURLResponse)?.statusCode ?? 0
    if status == 401 { throw DemoError.status(401) }
    return status
}

/// Reacts to a 401: fetches a new token, with the queue suspended, and requeues the failures.
final class RefreshOn401Reactor: Reactor {
    let context: DemoContext
    let tokens: TokenBox

    init(context: DemoContext, tokens: TokenBox) {
        self.context = context
        self.tokens = tokens
    }

    var configuration: ReactorConfiguration {
        ReactorConfiguration(timeout: .seconds(10), requeuesTask: true, suspendsTaskQueue: true)
    }

    func shouldExecute<T: ManagedTask>(
        after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
    ) -> Bool {
        if case .failure(DemoError.status(401)) = result { return true }
        return false
    }

    func execute() async throws {
        struct TokenResponse: Decodable { let access_token: String }
        let (data, _) = try await context.fetch("/token", method: "POST")
        tokens.set(try JSONDecoder().decode(TokenResponse.self, from: data).access_token)
    }
}
#endif
