import Foundation
import TaskKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The body and response of a completed HTTP request.
public struct URLTaskResponse: Sendable {
    /// The response body.
    public let data: Data
    /// The HTTP response (any status, 4xx and 5xx included).
    public let response: HTTPURLResponse

    /// Creates a response value.
    public init(data: Data, response: HTTPURLResponse) {
        self.data = data
        self.response = response
    }

    /// The response's status code.
    public var statusCode: Int { response.statusCode }
}

/// A `ManagedTask` that sends one `URLRequest` through a ``URLTaskManager``.
///
/// Created by ``URLTaskManager`` for each request. Interceptors see it (and may change
/// ``request``) before it runs; reactors see it after. One execution of the task is the whole
/// life of the request: each attempt adapts the request through every ``URLTaskInterceptor``,
/// sends it through the manager's transport and asks the interceptors whether to retry
/// (``URLTaskInterceptor/retry(_:for:dueTo:context:)``), waiting on the manager's clock between
/// attempts. A status such as 404 or 500 is a successful result (as with `URLSession`); only a
/// failure to get a response, or an interceptor's error, fails the task.
public final class URLTask: ManagedTask {
    /// The task's successful result.
    public typealias SuccessValue = URLTaskResponse

    /// The request as given to the manager.
    public let originalRequest: URLRequest

    /// The request to send: interceptors may change it in
    /// ``URLTaskInterceptor/intercept(task:currentBatchCount:)``. Each attempt further adapts a
    /// copy of it, so adaptations (such as a bearer token) are redone on every attempt.
    public var request: URLRequest {
        get { state.withLock { $0.request } }
        set { state.withLock { $0.request = newValue } }
    }

    /// The deadline the manager applies to this task (``URLTaskManager``'s default timeout).
    public let timeout: Duration?

    /// How many attempts have been made so far (adapted, and sent unless an adapter failed),
    /// over every execution of the task.
    public var attempts: Int { state.withLock { $0.attempts } }

    /// A number identifying the request in its manager's log records (metadata `request`).
    public let requestID: UInt64

    private struct State {
        var request: URLRequest
        var attempts = 0
        var executions = 0
        /// Executions running now (a requeued task may run again, never twice at once).
        var running = 0
        /// Waiting for `running` to reach zero.
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state: LockedState<State>
    let pipeline: URLTaskPipeline

    init(request: URLRequest, timeout: Duration?, pipeline: URLTaskPipeline) {
        self.originalRequest = request
        self.timeout = timeout
        self.state = LockedState(State(request: request))
        self.pipeline = pipeline
        self.requestID = pipeline.nextRequestID()
    }

    /// Runs the request's attempts (adapt, send, retry) and returns the final response.
    public func execute() async throws -> URLTaskResponse {
        state.withLock { $0.running += 1 }
        defer { executionEnded() }
        return try await pipeline.run(self)
    }

    private func executionEnded() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.running -= 1
            guard state.running == 0 else { return [] }
            defer { state.idleWaiters.removeAll() }
            return state.idleWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once no execution of the task runs: its transport call has returned. (A cancelled
    /// manager answers its caller at once; a coalesced flight that was cancelled waits here, so
    /// that the next flight for its key never overlaps it.)
    func waitUntilNotExecuting() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = state.withLock { state -> Bool in
                if state.running == 0 { return true }
                state.idleWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }

    /// Counts an execution; more than one means a reactor requeued the task.
    func recordExecution() -> Int {
        state.withLock { state in
            state.executions += 1
            return state.executions
        }
    }

    func recordAttempt() -> Int {
        state.withLock { state in
            state.attempts += 1
            return state.attempts
        }
    }
}
