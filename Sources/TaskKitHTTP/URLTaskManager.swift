import Dispatch
import Foundation
import Logging
import TaskKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends HTTP requests as ``URLTask``s of a `TaskManager`: every request passes through
/// interceptors (adapt, hold, discard, retry, re-authenticate) and reactors, with handles,
/// cancellation and deadlines.
///
/// ```swift
/// let manager = URLTaskManager(interceptors: [authenticator, HTTPRetryPolicy()], transport: URLSessionTransport())
/// let (data, response) = try await manager.data(for: URLRequest(url: profileURL))
/// ```
///
/// Semantics:
/// - **Statuses are results.** Like `URLSession`, any HTTP status (404, 500, …) is returned as a
///   response once the interceptors stop retrying; errors are thrown only when no response could
///   be obtained (a `URLError`), when an interceptor throws (for example
///   ``AuthenticationError``), for a URL that is not `http`/`https` (``URLTaskError``), or for the
///   manager's own outcomes (`TaskError.cancelled`, `.timedOut`, `.discarded`).
/// - **Cancellation.** Cancelling the Swift task awaiting ``data(for:timeout:)`` cancels the
///   in-flight request and any wait between attempts, and the caller gets `CancellationError`,
///   as from every `async` API of TaskKit. Cancelling through `TaskHandle/cancel()` (the
///   callback form's handle) does the same and completes with `TaskError.cancelled`.
/// - **Deadlines.** `timeout` (or the manager's default) bounds the whole request — all attempts
///   and waits — on the manager's clock, with sub-second precision (unlike
///   `URLRequest.timeoutInterval`, which FoundationNetworking truncates to whole seconds). On
///   expiry the request is cancelled and the caller gets `TaskError.timedOut`.
/// - **Logging.** Each request's life is logged at `.debug` through the injected logger (silent
///   by default), one record per step with an `event` metadata key: `adapted`, `queued` (with a
///   ``HostConcurrencyLimit``), `sent`, `retried`, `replayed`, `completed`, and `reacted` /
///   `requeued` for reactors; with a ``CircuitBreakerPolicy``, `circuit` when a host's circuit
///   changes. Nothing is built when the logger's level is above `.debug`.
public final class URLTaskManager: Sendable {
    /// The task manager requests run on: its handles, cancellation, deadlines, holds and
    /// reactions apply to every request. Not public: a caller could shut it down or add unrelated
    /// work to it; the service conformance (`TaskKitServiceLifecycle`) runs it.
    package let taskManager: TaskManager
    /// The bare transport requests are sent through (no interceptors).
    public let transport: any HTTPTransport
    /// The interceptors, in the order they see each request.
    public let interceptors: [any URLTaskInterceptor]
    /// The deadline applied to requests sent without their own `timeout`; `nil` for none.
    public let defaultTimeout: Duration?

    private let pipeline: URLTaskPipeline
    /// The slots of each host, with `hostConcurrency:`; `nil` without.
    var hostLimiter: HostConcurrencyLimiter? { pipeline.hostLimiter }
    /// The circuits of each host, with `circuitBreaker:`; `nil` without.
    var circuitBreaker: CircuitBreaker? { pipeline.circuitBreaker }
    /// The retry budgets of each host, with `retryBudget:`; `nil` without.
    var retryBudget: RetryBudgetLedger? { pipeline.retryBudget }
    /// The token buckets of each host, with `rateLimit:`; `nil` without.
    var rateLimiter: HostRateLimiter? { pipeline.rateLimiter }
    /// The flights of identical requests, with `coalescing:`; `nil` without.
    let coalescer: RequestCoalescer?

    /// Creates a manager over any ``HTTPTransport``.
    ///
    /// - Parameters:
    ///   - interceptors: see every request, in this order (put a ``BearerTokenAuthenticator``
    ///     before an ``HTTPRetryPolicy``).
    ///   - reactors: react to every result, in this order.
    ///   - transport: sends the requests: ``URLSessionTransport``, or on a server (and on Linux
    ///     for any server you do not control) `AsyncHTTPClientTransport` from
    ///     `TaskKitAsyncHTTPClient`.
    ///   - maximumConcurrentTasks: the most requests in flight at once; `nil` for no limit.
    ///   - hostConcurrency: With a limit, at most ``HostConcurrencyLimit/maximumInFlight``
    ///     attempts go to one host at once, and the others wait in a bounded first-in, first-out
    ///     queue per host (see ``HostConcurrencyLimit``); `nil` (default): no limit per host.
    ///   - rateLimit: With a limit, the attempts sent to one host follow a token bucket (a rate
    ///     and a burst), waiting for a token within their deadline, and a `429` or `503` with
    ///     `Retry-After` pauses every attempt to that host until then (see ``HostRateLimit``);
    ///     `nil` (default): no rate limit.
    ///   - circuitBreaker: With a policy, a host whose attempts fail too often gets no attempt for
    ///     a while: they fail at once with ``URLTaskError/circuitOpen(host:retryIn:)`` (see
    ///     ``CircuitBreakerPolicy``); `nil` (default): every attempt goes out.
    ///   - retryBudget: With a budget, the retries sent to a host stay within a share of the
    ///     attempts sent to it recently, plus a floor; a retry the budget refuses is not made and
    ///     the caller gets the failure that asked for it (see ``RetryBudget``); `nil` (default): the
    ///     retry interceptors alone decide.
    ///   - hedging: With a policy, an attempt of an idempotent request (or one carrying
    ///     `Idempotency-Key`) that has no response after the policy's delay gets a second copy;
    ///     the first response wins and the other is cancelled; hedges spend the retry budget (see
    ///     ``HedgingPolicy``); `nil` (default): one copy per attempt.
    ///   - timeout: the default deadline of each request; `nil` for none.
    ///   - coalescing: With a configuration, identical eligible requests sent through
    ///     ``data(for:timeout:)`` or ``response(for:timeout:)`` while one is in flight share its
    ///     round trip (see ``URLTaskCoalescing`` and *Using URLTaskManager*); `nil` (default):
    ///     every request goes out on its own.
    ///   - shutdownGracePeriod: see `TaskManager.shutdownGracePeriod`. Default: 10 seconds.
    ///   - clock: the clock for deadlines, delays and retry backoff.
    ///   - logger: receives each request's life at `.debug`; silent by default.
    ///   - metricsLabel: With a label, the manager reports through the bootstrapped swift-metrics
    ///     `MetricsSystem` with the dimension `("name", metricsLabel)`: `taskkit_http_requests`
    ///     (`method`, and `status`: `1xx` … `5xx` or `error`; once per request, with its final
    ///     outcome), `taskkit_http_retries`, `taskkit_http_token_refreshes`,
    ///     `taskkit_http_request_duration`; with `hostConcurrency:`, `taskkit_http_host_queued` (a
    ///     meter: attempts waiting for a slot), `taskkit_http_host_queue_wait` (a timer: how long
    ///     each attempt that waited waited) and `taskkit_http_host_queue_rejections` (attempts
    ///     refused by a full queue); with `circuitBreaker:`, `taskkit_http_circuit_transitions`
    ///     (by `state`: `open`, `half_open`, `closed`) and `taskkit_http_circuit_rejections`
    ///     (attempts refused by an open circuit); with `retryBudget:`,
    ///     `taskkit_http_retry_budget_exhausted` (retries refused by a spent budget); with
    ///     `rateLimit:`, `taskkit_http_rate_limit_tokens`, `taskkit_http_rate_limit_waiting` (a
    ///     meter), `taskkit_http_rate_limit_wait` (a timer), `taskkit_http_rate_limit_rejections`
    ///     and `taskkit_http_host_pauses`; with `hedging:`, `taskkit_http_hedges` (hedges sent)
    ///     and `taskkit_http_hedges_won` (hedges whose response won); and the metrics of the `TaskManager` it runs requests
    ///     on, under the same label.
    ///     `nil` (default): no metric objects, no cost.
    ///   - tracing: With a tracer (`.distributedTracing` from `TaskKitTracing`), each attempt is an
    ///     OpenTelemetry HTTP client span named by the method (`http.request.method`, `url.full`,
    ///     `http.response.status_code`, `http.request.resend_count`) whose context is injected into
    ///     the request's headers, inside the span of its task (`URLTask`) in the manager's `TaskManager`; a
    ///     failure without a response and a 4xx/5xx status set the error status (see
    ///     TaskKit's *Running on a server* article). `TaskTracing.none` (default): no span, no
    ///     cost.
    /// - Precondition: `timeout`, when given, is greater than zero.
    public init(
        interceptors: [any URLTaskInterceptor] = [],
        reactors: [any URLTaskReactor] = [],
        transport: any HTTPTransport,
        maximumConcurrentTasks: Int? = nil,
        hostConcurrency: HostConcurrencyLimit? = nil,
        rateLimit: HostRateLimit? = nil,
        circuitBreaker: CircuitBreakerPolicy? = nil,
        retryBudget: RetryBudget? = nil,
        hedging: HedgingPolicy? = nil,
        timeout: Duration? = nil,
        coalescing: URLTaskCoalescing? = nil,
        shutdownGracePeriod: Duration = .seconds(10),
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger = .silent(label: "TaskKitHTTP"),
        metricsLabel: String? = nil,
        tracing: TaskTracing = .none
    ) {
        if let timeout {
            precondition(timeout > .zero, "URLTaskManager: timeout must be > 0, got \(timeout)")
        }
        self.transport = transport
        self.interceptors = interceptors
        self.defaultTimeout = timeout
        self.coalescer = coalescing.map {
            RequestCoalescer(
                configuration: $0, clock: clock, logger: logger, metricsLabel: metricsLabel, tracer: tracing.tracer
            )
        }
        self.pipeline = URLTaskPipeline(
            interceptors: interceptors, transport: transport, clock: clock, logger: logger,
            metrics: metricsLabel.map { URLTaskMetrics(label: $0) }, tracer: tracing.tracer,
            hostLimiter: hostConcurrency.map { HostConcurrencyLimiter(limit: $0, clock: clock, metricsLabel: metricsLabel) },
            circuitBreaker: circuitBreaker.map {
                CircuitBreaker(policy: $0, clock: clock, logger: logger, metricsLabel: metricsLabel)
            },
            retryBudget: retryBudget.map { RetryBudgetLedger(budget: $0, clock: clock, metricsLabel: metricsLabel) },
            rateLimiter: rateLimit.map { HostRateLimiter(limit: $0, clock: clock, logger: logger, metricsLabel: metricsLabel) },
            hedging: hedging, metricsLabel: metricsLabel
        )
        self.taskManager = TaskManager(
            interceptors: interceptors.map { $0 as any Interceptor },
            reactors: reactors.map { $0 as any Reactor },
            maximumConcurrentTasks: maximumConcurrentTasks,
            shutdownGracePeriod: shutdownGracePeriod,
            clock: clock,
            logger: logger,
            metricsLabel: metricsLabel,
            tracing: tracing
        )
    }

    /// A task for `request`, to add to a `TaskManager` of your own: it sends `request` through this
    /// manager's interceptors, reactors, retry policy and transport.
    public func makeTask(for request: URLRequest, timeout: Duration? = nil) -> URLTask {
        URLTask(request: request, timeout: timeout ?? defaultTimeout, pipeline: pipeline)
    }

    /// Sends `request` and returns the body and response.
    ///
    /// - Parameters:
    ///   - request: an `http` or `https` request.
    ///   - timeout: the deadline of the whole request; default: the manager's.
    /// - Throws: see the type's semantics: a `URLError`, an interceptor's error,
    ///   ``URLTaskError``, a `TaskError`, or `CancellationError` when the calling task is cancelled.
    public func data(for request: URLRequest, timeout: Duration? = nil) async throws -> (Data, HTTPURLResponse) {
        let result = try await response(for: request, timeout: timeout)
        return (result.data, result.response)
    }

    /// Sends `request` and returns its ``URLTaskResponse``; as ``data(for:timeout:)``.
    ///
    /// With `coalescing:`, an eligible request joins an identical one in flight (see
    /// ``URLTaskCoalescing``): the flight runs once, in a task of its own, without a deadline of
    /// its own, and each caller waits for it at most its own `timeout` (or the manager's).
    public func response(for request: URLRequest, timeout: Duration? = nil) async throws -> URLTaskResponse {
        if let coalescer, let key = coalescer.configuration.flightKey(for: request) {
            let pipeline = self.pipeline
            let taskManager = self.taskManager
            return try await coalescer.response(for: request, key: key, timeout: timeout ?? defaultTimeout) {
                let task = URLTask(request: request, timeout: nil, pipeline: pipeline)
                do {
                    return try await taskManager.value(of: task, timeout: nil)
                } catch where Task.isCancelled {
                    // Abandoned: end only once the transport call has returned.
                    await task.waitUntilNotExecuting()
                    throw error
                }
            }
        }
        let task = makeTask(for: request, timeout: timeout)
        return try await taskManager.value(of: task, timeout: task.timeout)
    }

    /// Adds `request` as a task and returns its handle; `completion` receives the outcome exactly
    /// once (on `completeOn` when given).
    ///
    /// - Parameters:
    ///   - request: an `http` or `https` request.
    ///   - startImmediately: when `false`, the request waits for `TaskHandle/start()`.
    ///   - after: a delay before the request is intercepted and sent.
    ///   - timeout: the deadline of the whole request; default: the manager's.
    ///   - completeOn: the queue of the completion; `nil` for any thread.
    ///   - completion: receives the response or the error.
    @discardableResult
    public func dataTask(
        with request: URLRequest,
        startImmediately: Bool = true,
        after: Duration? = nil,
        timeout: Duration? = nil,
        completeOn: DispatchQueue? = nil,
        completion: (@Sendable (Result<URLTaskResponse, any Error>) -> Void)? = nil
    ) -> TaskHandle {
        let task = makeTask(for: request, timeout: timeout)
        return taskManager.add(
            task: task, startImmediately: startImmediately, after: after, timeout: task.timeout,
            completeOn: completeOn, completion: completion
        )
    }

    /// Suspends until every started request has finished (see
    /// `TaskManager/waitTillAllTasksFinished()`).
    public func waitTillAllTasksFinished() async {
        await taskManager.waitTillAllTasksFinished()
    }
}
