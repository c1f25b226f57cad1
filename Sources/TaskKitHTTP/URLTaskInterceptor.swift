import Foundation
import TaskKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What an interceptor decides after an attempt.
public enum URLTaskRetryDecision: Sendable, Hashable {
    /// This interceptor does not ask for another attempt (the next interceptor is asked).
    case doNotRetry
    /// Send the request again at once (it is adapted again first). Counts as a retry of this
    /// interceptor.
    case retry
    /// Send the request again after this delay, measured on the manager's clock. Counts as a
    /// retry of this interceptor.
    case retryAfter(Duration)
    /// Send the request again at once because the request itself must change (for example a
    /// new credential), not because the attempt failed: logged as a replay, and no other
    /// interceptor's retry count moves.
    case replay
}

/// What an interceptor knows about the attempt it adapts or judges.
///
/// The counts are per interceptor: ``retriesMade`` and ``lastDelay`` only reflect the
/// retries *this* interceptor asked for, so a replay requested by ``BearerTokenAuthenticator``
/// does not use up the budget of an ``HTTPRetryPolicy`` (and the other way round).
public struct URLTaskContext: Sendable {
    /// The 1-based number of the attempt among all attempts of the request (retries and replays
    /// of every interceptor included).
    public let attempt: Int
    /// How many times this interceptor has asked for the request to be sent again
    /// (``URLTaskRetryDecision/retry``, ``URLTaskRetryDecision/retryAfter(_:)`` or
    /// ``URLTaskRetryDecision/replay``).
    public let retriesMade: Int
    /// The delay of this interceptor's latest ``URLTaskRetryDecision/retryAfter(_:)``, if any.
    public let lastDelay: Duration?
    /// The manager's bare transport: requests sent through it bypass every interceptor (for
    /// example a token refresh).
    public let transport: any HTTPTransport
    /// The manager's metrics, with a `metricsLabel` (token refreshes count under its label).
    var metrics: URLTaskMetrics?

    /// Counts a token refresh under the manager's label; `nil` without metrics.
    var refreshStarted: (@Sendable () -> Void)? {
        guard let metrics else { return nil }
        return { metrics.tokenRefreshes.increment() }
    }

    /// Creates a context (useful to test an interceptor on its own).
    ///
    /// - Parameters:
    ///   - attempt: The 1-based attempt number of the request.
    ///   - retriesMade: How many times this interceptor asked for another attempt. Default 0.
    ///   - lastDelay: This interceptor's latest retry delay. Default `nil`.
    ///   - transport: The bare transport.
    public init(attempt: Int, retriesMade: Int = 0, lastDelay: Duration? = nil, transport: any HTTPTransport) {
        self.attempt = attempt
        self.retriesMade = retriesMade
        self.lastDelay = lastDelay
        self.transport = transport
    }
}

/// An `Interceptor` for HTTP requests, with two extra, asynchronous hooks.
///
/// A ``URLTaskManager`` passes each of its interceptors three times over a request's life:
///
/// 1. ``intercept(task:currentBatchCount:)`` — once, before the task runs, as any TaskManager
///    interceptor: change ``URLTask/request``, and execute, hold (batch), discard or
///    force-execute the task. Synchronous.
/// 2. ``adapt(_:for:context:)`` — before *every* attempt, in interceptor order: return the request
///    to send (for example with a fresh `Authorization` header). May suspend (to wait for a token)
///    and may throw: the error ends the task and reaches the caller unchanged.
/// 3. ``retry(_:for:dueTo:context:)`` — after every attempt, in interceptor order until one asks
///    for a retry: decide whether to send again and when. May suspend (to refresh a token) and
///    may throw: the error replaces the attempt's outcome and ends the task.
///
/// All three have defaults (execute, no change, no retry), so implement only what you need.
/// ``BearerTokenAuthenticator`` and ``HTTPRetryPolicy`` are built-in interceptors.
///
/// ```swift
/// struct APIKey: URLTaskInterceptor {
///     let key: String
///     func intercept(task: inout URLTask, currentBatchCount: Int) -> InterceptCommand {
///         task.request.setValue(key, forHTTPHeaderField: "X-API-Key")
///         return .execute
///     }
/// }
/// ```
public protocol URLTaskInterceptor: Interceptor {
    /// Examines, and may change, `task` before it runs. Default: `.execute`, no change.
    func intercept(task: inout URLTask, currentBatchCount: Int) -> InterceptCommand

    /// The request to send for this attempt. Default: `request` unchanged.
    func adapt(_ request: URLRequest, for task: URLTask, context: URLTaskContext) async throws -> URLRequest

    /// Whether to send `request` again after `outcome`. Default: ``URLTaskRetryDecision/doNotRetry``.
    func retry(
        _ request: URLRequest, for task: URLTask, dueTo outcome: Result<URLTaskResponse, any Error>,
        context: URLTaskContext
    ) async throws -> URLTaskRetryDecision
}

extension URLTaskInterceptor {
    /// Executes the task unchanged.
    public func intercept(task: inout URLTask, currentBatchCount: Int) -> InterceptCommand { .execute }

    /// Returns `request` unchanged.
    public func adapt(_ request: URLRequest, for task: URLTask, context: URLTaskContext) async throws -> URLRequest {
        request
    }

    /// Never asks for a retry.
    public func retry(
        _ request: URLRequest, for task: URLTask, dueTo outcome: Result<URLTaskResponse, any Error>,
        context: URLTaskContext
    ) async throws -> URLTaskRetryDecision {
        .doNotRetry
    }

    /// Forwards ``URLTask``s to ``intercept(task:currentBatchCount:)-(URLTask,_)``; executes any
    /// other task unchanged.
    public func intercept<T: ManagedTask>(task: inout T, currentBatchCount: Int) -> InterceptCommand {
        guard var urlTask = task as? URLTask else { return .execute }
        let command = intercept(task: &urlTask, currentBatchCount: currentBatchCount)
        if let replaced = urlTask as? T { task = replaced }
        return command
    }
}

/// A `Reactor` for HTTP requests: sees the ``URLTask`` and its ``URLTaskResponse`` (or error)
/// with their concrete types.
///
/// It behaves exactly as a TaskManager reactor (see `Reactor`): when
/// ``shouldExecute(after:from:with:)-(_,URLTask,_)`` returns `true` for a result, the reaction
/// runs once (tasks that match meanwhile join it), and with
/// `ReactorConfiguration/requeuesTask` the triggering requests are sent again afterwards.
/// Implement `Reactor/execute()`, or conform to `CallbackReactor` or `DecisionOnlyReactor` too.
public protocol URLTaskReactor: Reactor {
    /// Whether `result` of `task` calls for this reaction.
    func shouldExecute(after result: Result<URLTaskResponse, any Error>, from task: URLTask, with handle: TaskHandle) -> Bool
}

extension URLTaskReactor {
    /// Forwards ``URLTask`` results to ``shouldExecute(after:from:with:)-(_,URLTask,_)``; ignores
    /// any other task. A match is logged (event `reacted`) through the manager's logger.
    public func shouldExecute<T: ManagedTask>(
        after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
    ) -> Bool {
        guard let urlTask = task as? URLTask else { return false }
        let urlResult: Result<URLTaskResponse, any Error>
        switch result {
        case .success(let value):
            guard let response = value as? URLTaskResponse else { return false }
            urlResult = .success(response)
        case .failure(let error):
            urlResult = .failure(error)
        }
        let matched = shouldExecute(after: urlResult, from: urlTask, with: handle)
        if matched { urlTask.pipeline.logReaction(of: urlTask, by: Self.self, handle: handle) }
        return matched
    }
}
