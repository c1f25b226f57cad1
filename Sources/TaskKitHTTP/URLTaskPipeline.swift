import Foundation
import CoreMetrics
import Logging
import Synchronization
import TaskKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The attempts of one request: adapt, send, ask whether to retry, wait, repeat.
///
/// Holds no mutable per-request state: everything per request lives in local variables of
/// ``run(_:)`` (attempt counts, each interceptor's retry count and last delay), so concurrent
/// requests share nothing but the interceptors (which guard their own state) and an atomic
/// request counter.
final class URLTaskPipeline: Sendable {
    let interceptors: [any URLTaskInterceptor]
    let transport: any HTTPTransport
    let clock: any Clock<Duration>
    let logger: Logger
    /// The manager's metric objects, with a `metricsLabel`; `nil` without.
    let metrics: URLTaskMetrics?
    /// The tracing seam, with a `tracing:` other than `.none`; `nil` (no span) without.
    let tracer: (any TaskTracer)?
    /// The slots of each host, with a `hostConcurrency:` limit; `nil` without.
    let hostLimiter: HostConcurrencyLimiter?
    /// The circuits of each host, with a `circuitBreaker:` policy; `nil` without.
    let circuitBreaker: CircuitBreaker?
    /// The retry budgets of each host, with a `retryBudget:`; `nil` without.
    let retryBudget: RetryBudgetLedger?
    /// The token buckets of each host, with a `rateLimit:`; `nil` without.
    let rateLimiter: HostRateLimiter?
    /// With a `hedging:` policy, when eligible attempts get a second copy; `nil` without.
    let hedging: HedgingPolicy?
    /// `taskkit_http_hedges` and `taskkit_http_hedges_won`, with `hedging:` and a `metricsLabel`.
    private let hedgeMetrics: (sent: Counter, won: Counter)?
    private let requestCounter = Atomic<UInt64>(0)

    init(
        interceptors: [any URLTaskInterceptor], transport: any HTTPTransport, clock: any Clock<Duration>,
        logger: Logger, metrics: URLTaskMetrics? = nil, tracer: (any TaskTracer)? = nil,
        hostLimiter: HostConcurrencyLimiter? = nil, circuitBreaker: CircuitBreaker? = nil,
        retryBudget: RetryBudgetLedger? = nil, rateLimiter: HostRateLimiter? = nil, hedging: HedgingPolicy? = nil,
        metricsLabel: String? = nil
    ) {
        self.rateLimiter = rateLimiter
        self.hedging = hedging
        self.hedgeMetrics = hedging == nil ? nil : metricsLabel.map { label in
            (Counter(label: "taskkit_http_hedges", dimensions: [("name", label)]),
             Counter(label: "taskkit_http_hedges_won", dimensions: [("name", label)]))
        }
        self.metrics = metrics
        self.hostLimiter = hostLimiter
        self.circuitBreaker = circuitBreaker
        self.retryBudget = retryBudget
        self.tracer = tracer
        self.interceptors = interceptors
        self.transport = transport
        self.clock = clock
        self.logger = logger
    }

    func nextRequestID() -> UInt64 {
        requestCounter.wrappingAdd(1, ordering: .relaxed).newValue
    }

    static func validate(_ request: URLRequest) throws {
        guard let scheme = request.url?.scheme?.lowercased(), scheme == "http" || scheme == "https",
            request.url?.host != nil
        else {
            throw URLTaskError.unsupportedURL(request.url)
        }
    }

    func run(_ task: URLTask) async throws -> URLTaskResponse {
        guard let metrics else { return try await attempts(task) }
        let elapsed = startStopwatch(on: clock)
        var outcome: Result<URLTaskResponse, any Error>?
        defer {
            metrics.requestDuration.record(elapsed())
            metrics.recordRequest(method: task.request.httpMethod, outcome: outcome)
        }
        do {
            let response = try await attempts(task)
            outcome = .success(response)
            return response
        } catch {
            outcome = .failure(error)
            throw error
        }
    }

    /// Every attempt of one execution of `task`: adapt, send, ask whether to retry, wait, repeat.
    private func attempts(_ task: URLTask) async throws -> URLTaskResponse {
        // Log records (and their metadata) are only built when someone will read them.
        let log = logger.logLevel <= .debug ? URLTaskLog(logger: logger, task: task) : nil
        if task.recordExecution() > 1 { log?.record(.requeued) }
        let count = interceptors.count
        var retries = [Int](repeating: 0, count: count)
        var delays = [Duration?](repeating: nil, count: count)
        while true {
            let attempt = task.recordAttempt()
            var request = task.request
            try Self.validate(request)
            for index in 0..<count {
                var context = URLTaskContext(
                    attempt: attempt, retriesMade: retries[index], lastDelay: delays[index], transport: transport
                )
                context.metrics = metrics
                request = try await interceptors[index].adapt(request, for: task, context: context)
            }
            try Self.validate(request)
            log?.record(.adapted, attempt: attempt, request: request)

            let (outcome, span) = try await sendAttempt(request, attempt: attempt, log: log)
            log?.record(.sent, attempt: attempt, outcome: outcome)
            if Task.isCancelled {
                span?.end()
                log?.record(.completed, attempt: attempt, outcome: outcome)
                return try outcome.get()
            }

            var decision = URLTaskRetryDecision.doNotRetry
            var decider = 0
            do {
                for index in 0..<count {
                    var context = URLTaskContext(
                        attempt: attempt, retriesMade: retries[index], lastDelay: delays[index], transport: transport
                    )
                    context.metrics = metrics
                    decision = try await interceptors[index].retry(request, for: task, dueTo: outcome, context: context)
                    if decision != .doNotRetry {
                        decider = index
                        break
                    }
                }
            } catch {
                span?.end()
                throw error
            }
            switch decision {
            case .doNotRetry:
                span?.end()
                log?.record(.completed, attempt: attempt, outcome: outcome)
                return try outcome.get()
            case .replay:
                span?.end()
                retries[decider] += 1
                log?.record(.replayed, attempt: attempt, outcome: outcome, by: interceptors[decider])
            case .retry, .retryAfter:
                // The budget is asked here, where every retry is decided; a replay is not a retry.
                var granted: (host: String, at: Duration)?
                if let retryBudget, let host = HostConcurrencyLimit.host(of: request.url) {
                    guard let at = retryBudget.grantRetry(host: host) else {
                        span?.addEvent("taskkit.http.retry_budget_exhausted")
                        span?.end()
                        log?.record(.retryBudgetExhausted, attempt: attempt, outcome: outcome, by: interceptors[decider])
                        log?.record(.completed, attempt: attempt, outcome: outcome)
                        return try outcome.get()
                    }
                    granted = (host, at)
                }
                span?.end()
                let delay: Duration? = if case .retryAfter(let delay) = decision { delay } else { nil }
                metrics?.retries.increment()
                retries[decider] += 1
                delays[decider] = delay
                log?.record(.retried, attempt: attempt, outcome: outcome, by: interceptors[decider], delay: delay ?? .zero)
                if let delay {
                    do {
                        try await clock.sleep(for: delay)
                    } catch {
                        // The caller left while it waited: the retry was never sent.
                        if let granted { retryBudget?.takeBack(.retry, host: granted.host, countedAt: granted.at) }
                        throw error
                    }
                }
            }
        }
    }

    /// Sends one attempt: through ``sendGuarded(_:attempt:log:hedge:)``, or with a `hedging:`
    /// policy and an eligible request, through ``sendHedged(_:attempt:log:policy:)``.
    private func sendAttempt(
        _ request: URLRequest, attempt: Int, log: URLTaskLog?
    ) async throws -> (Result<URLTaskResponse, any Error>, (any TaskSpan)?) {
        guard let hedging, HedgingPolicy.isEligible(request) else {
            return try await sendGuarded(request, attempt: attempt, log: log)
        }
        return try await sendHedged(request, attempt: attempt, log: log, policy: hedging)
    }

    /// What a child of ``sendHedged(_:attempt:log:policy:)`` reports.
    private enum HedgeEvent: Sendable {
        /// Copy `copy` (0 for the first) ended: its outcome and open span, or the error a guard
        /// threw (its span ended).
        case ended(copy: Int, Result<(Result<URLTaskResponse, any Error>, (any TaskSpan)?), any Error>)
        /// The delay before the next hedge passed.
        case delayPassed
    }

    /// The events of one hedged attempt, sent by its copies and delays, read by the attempt: a
    /// queue with one reader. Not an `AsyncStream`: its code in the standard library is not
    /// specialized, and looks its generic types up at run time on every attempt (see
    /// `Benchmarks/NOTES.md`). Each continuation is resumed once, outside the lock: by `send` (taken from the
    /// state), by the cancellation handler (taken from the state), or at once by `next`.
    private final class HedgeEvents: Sendable {
        private struct State {
            var buffer: [HedgeEvent] = []
            var reader: CheckedContinuation<HedgeEvent?, Never>?
            /// The attempt went on: events sent from now on stay with their senders.
            var finished = false
            /// The reading task was cancelled: `next` returns nil once the buffer is empty.
            var cancelled = false
        }

        private enum Delivery {
            case refused, buffered
            case resume(CheckedContinuation<HedgeEvent?, Never>)
        }

        private let state = LockedState(State())

        /// Delivers `event`; `false` when the attempt has gone on (the event is the sender's).
        func send(_ event: HedgeEvent) -> Bool {
            let delivery = state.withLock { state -> Delivery in
                if state.finished { return .refused }
                if let reader = state.reader {
                    state.reader = nil
                    return .resume(reader)
                }
                state.buffer.append(event)
                return .buffered
            }
            switch delivery {
            case .refused: return false
            case .buffered: return true
            case .resume(let reader):
                reader.resume(returning: event)
                return true
            }
        }

        /// The next event, waiting for one; nil once the reading task is cancelled and nothing
        /// is left to read.
        func next() async -> HedgeEvent? {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<HedgeEvent?, Never>) in
                    let ready = state.withLock { state -> HedgeEvent?? in
                        if !state.buffer.isEmpty { return .some(state.buffer.removeFirst()) }
                        if state.cancelled { return .some(nil) }
                        state.reader = continuation
                        return nil
                    }
                    if let ready { continuation.resume(returning: ready) }
                }
            } onCancel: {
                let reader = state.withLock { state -> CheckedContinuation<HedgeEvent?, Never>? in
                    state.cancelled = true
                    defer { state.reader = nil }
                    return state.reader
                }
                reader?.resume(returning: nil)
            }
        }

        /// Ends delivery (later events stay with their senders) and returns the unread events.
        func finish() -> [HedgeEvent] {
            state.withLock { state in
                state.finished = true
                defer { state.buffer = [] }
                return state.buffer
            }
        }
    }

    /// Sends the first copy of an attempt, and a hedge each time `policy.delay` passes without a
    /// response (at most `policy.maximumHedges`; each a retry the host's budget must grant). The
    /// first response wins and the other copies are cancelled, without waiting for them to end
    /// (each ends its own span); a copy that fails without a response is set aside while another
    /// is under way, and is the outcome when none is.
    ///
    /// - Throws: `CancellationError` when the caller is cancelled (before anything is sent, if
    ///   it was already).
    private func sendHedged(
        _ request: URLRequest, attempt: Int, log: URLTaskLog?, policy: HedgingPolicy
    ) async throws -> (Result<URLTaskResponse, any Error>, (any TaskSpan)?) {
        // The copies do not inherit the caller's cancellation: a cancel issued before is checked here.
        try Task.checkCancellation()
        let host = HostConcurrencyLimit.host(of: request.url)
        let clock = self.clock
        // The copies and the delays run as tasks of their own, not as children of a task group:
        // the attempt takes the first response and goes on at once, and a cancelled copy ends on
        // its own time (its span, its slot, its circuit record), so a transport slow to honour a
        // cancel never holds the caller. A copy that ends after the attempt went on has its event
        // refused and ends its own span; one that ended before is drained below.
        let events = HedgeEvents()
        var running: [Task<Void, Never>] = []
        func send(copy: Int) {
            running.append(Task {
                let sent: Result<(Result<URLTaskResponse, any Error>, (any TaskSpan)?), any Error>
                do {
                    sent = .success(try await self.sendGuarded(request, attempt: attempt, log: log, hedge: copy))
                } catch {
                    sent = .failure(error)
                }
                if !events.send(.ended(copy: copy, sent)), case .success((_, let span)) = sent {
                    span?.end()
                }
            })
        }
        func waitForDelay() {
            running.append(Task {
                guard (try? await clock.sleep(for: policy.delay)) != nil else { return }
                _ = events.send(.delayPassed)
            })
        }
        send(copy: 0)
        waitForDelay()
        var hedges = 0
        var underWay = 1
        var setAside: Result<(Result<URLTaskResponse, any Error>, (any TaskSpan)?), any Error>?
        var winner: Result<(Result<URLTaskResponse, any Error>, (any TaskSpan)?), any Error>?
        // `next()` returns nil only when the caller is cancelled.
        while winner == nil, let event = await events.next() {
            switch event {
            case .delayPassed:
                guard hedges < policy.maximumHedges else { continue }
                if let retryBudget, let host, retryBudget.grantRetry(host: host) == nil {
                    // A spent budget: no hedge now, nor later for this attempt.
                    log?.record(.hedgeRefused, attempt: attempt, request: request)
                    hedges = policy.maximumHedges
                    continue
                }
                hedges += 1
                underWay += 1
                hedgeMetrics?.sent.increment()
                log?.record(.hedged, attempt: attempt, request: request, delay: policy.delay * hedges)
                send(copy: hedges)
                if hedges < policy.maximumHedges { waitForDelay() }
            case .ended(let copy, let sent):
                underWay -= 1
                if case .success((.success, let span)) = sent {
                    if copy > 0 {
                        hedgeMetrics?.won.increment()
                        span?.addEvent("taskkit.http.hedge_won")
                    }
                    winner = sent
                } else if underWay == 0 {
                    // Every copy sent has failed: the last failure is the attempt's outcome
                    // (a failure does not start a hedge: the retry interceptors decide).
                    winner = sent
                } else {
                    if case .success((_, let span)) = setAside { span?.end() }
                    setAside = sent
                }
            }
        }
        for task in running { task.cancel() }
        // What ended before is drained here; what ends later ends its own span.
        for case .ended(_, .success((_, let span))) in events.finish() { span?.end() }
        if case .success((_, let span)) = setAside { span?.end() }
        guard let winner else { throw CancellationError() }
        return try winner.get()
    }

    /// Sends one attempt through the guards of its host, inside its span when there is a tracer:
    /// the circuit breaker admits it (or throws ``URLTaskError/circuitOpen(host:retryIn:)``), the
    /// rate limit gives it a token (waiting for one, or throwing
    /// ``URLTaskError/rateLimited(host:retryIn:)``), then it takes a slot of the host (waiting in
    /// its queue, or throwing), which it holds only while the transport sends it. The circuit
    /// counts the outcome unless the request was cancelled meanwhile; the retry budget counts the
    /// attempt as it is sent, and takes it back if the request was cancelled meanwhile; a `429`
    /// or `503` with `Retry-After` pauses the host's rate limit.
    ///
    /// Returns the outcome with the attempt's span still open (the caller ends it once it has
    /// decided what follows, which may add an event); a thrown error has ended the span.
    ///
    /// `hedge`: 0 for an attempt's first copy, 1… for its hedges (the span's `taskkit.http.hedge`).
    private func sendGuarded(
        _ request: URLRequest, attempt: Int, log: URLTaskLog?, hedge: Int = 0
    ) async throws -> (Result<URLTaskResponse, any Error>, (any TaskSpan)?) {
        let span = tracer.map { startSpan(for: request, attempt: attempt, tracer: $0) }
        if hedge > 0 { span?.setAttribute("taskkit.http.hedge", hedge) }
        guard hostLimiter != nil || circuitBreaker != nil || retryBudget != nil || rateLimiter != nil,
            let host = HostConcurrencyLimit.host(of: request.url)
        else {
            return (await send(request, span: span), span)
        }
        do {
            let probe: Bool
            do {
                probe = try circuitBreaker?.admit(host: host) ?? false
            } catch {
                span?.addEvent("taskkit.http.circuit_rejected")
                throw error
            }
            do {
                if let rateLimiter, let waited = try await rateLimiter.acquire(host: host) {
                    log?.record(.rateLimited, attempt: attempt, request: request, delay: waited)
                    span?.addEvent("taskkit.http.rate_limit_waited")
                    span?.setAttribute("taskkit.http.rate_limit_wait_ms", waited.wholeMilliseconds)
                }
                if let hostLimiter, let waited = try await hostLimiter.acquire(host: host) {
                    log?.record(.queued, attempt: attempt, request: request, delay: waited)
                    span?.addEvent("taskkit.http.host_slot_waited")
                    span?.setAttribute("taskkit.http.host_queue_wait_ms", waited.wholeMilliseconds)
                }
            } catch {
                circuitBreaker?.record(host: host, probe: probe, outcome: .failure(error), cancelled: true)
                switch error as? URLTaskError {
                case .rateLimited?: span?.addEvent("taskkit.http.rate_limit_rejected")
                case .hostQueueFull?: span?.addEvent("taskkit.http.host_queue_rejected")
                default: break
                }
                throw error
            }
            let counted = retryBudget?.attemptSent(host: host)
            let outcome = await send(request, span: span)
            hostLimiter?.release(host: host)
            let cancelled = Task.isCancelled
            circuitBreaker?.record(host: host, probe: probe, outcome: outcome, cancelled: cancelled)
            if cancelled, let counted { retryBudget?.takeBack(.attempt, host: host, countedAt: counted) }
            if let rateLimiter, case .success(let response) = outcome,
                response.statusCode == 429 || response.statusCode == 503,
                let asked = RetryAfter.delay(from: response.response, now: Date()),
                let paused = rateLimiter.pause(host: host, for: asked)
            {
                span?.addEvent("taskkit.http.host_paused")
                span?.setAttribute("taskkit.http.host_pause_ms", paused.wholeMilliseconds)
            }
            return (outcome, span)
        } catch {
            span?.recordFailure(error)
            span?.end()
            throw error
        }
    }

    /// Starts the OpenTelemetry HTTP client span of one attempt, named by the method, with
    /// `http.request.method`, `url.full` and `http.request.resend_count` (from the second attempt
    /// on). The span covers the attempt's guards (circuit, rate limit, host slot: each decision
    /// that made it wait or refused it is an event) and the transport's call.
    private func startSpan(for request: URLRequest, attempt: Int, tracer: any TaskTracer) -> any TaskSpan {
        let method = request.httpMethod ?? "GET"
        let span = tracer.startSpan(method, kind: .client, parent: tracer.currentContext())
        span.setAttribute("http.request.method", method)
        if let url = request.url { span.setAttribute("url.full", url.absoluteString) }
        if attempt > 1 { span.setAttribute("http.request.resend_count", attempt - 1) }
        return span
    }

    /// Sends one attempt through the transport. With a span: the span's propagation headers
    /// (W3C `traceparent` with a W3C instrument) go with the request, the span is current while
    /// the transport sends (a transport that traces, such as AsyncHTTPClient, starts its span
    /// under it), and it gets `http.response.status_code`; a failure without a response, or a
    /// 4xx/5xx status, sets the error status and `error.type`.
    private func send(_ request: URLRequest, span: (any TaskSpan)?) async -> Result<URLTaskResponse, any Error> {
        guard let span else {
            do {
                let (data, response) = try await transport.send(request)
                return .success(URLTaskResponse(data: data, response: response))
            } catch {
                return .failure(error)
            }
        }
        var request = request
        for header in span.propagationHeaders() {
            request.setValue(header.value, forHTTPHeaderField: header.name)
        }
        let sent = request
        do {
            let (data, response) = try await span.withCurrent(isolation: #isolation) {
                try await transport.send(sent)
            }
            span.setAttribute("http.response.status_code", response.statusCode)
            if response.statusCode >= 400 {
                span.setAttribute("error.type", String(response.statusCode))
                span.setErrorStatus()
            }
            return .success(URLTaskResponse(data: data, response: response))
        } catch {
            span.setAttribute("error.type", String(describing: type(of: error)))
            span.recordFailure(error)
            return .failure(error)
        }
    }

    /// Logs that `reactor` reacts to the result of `task` (called by ``URLTaskReactor``'s forwarding).
    func logReaction(of task: URLTask, by reactor: any Reactor.Type, handle: TaskHandle) {
        guard logger.logLevel <= .debug else { return }
        URLTaskLog(logger: logger, task: task).record(.reacted, reactor: reactor, handle: handle)
    }
}

/// The `.debug` records of one request's life, each with an `event` metadata key.
///
/// Only created when the logger's level is `.debug` or lower, so a silent or `.info` logger
/// costs one level comparison per request and nothing else.
struct URLTaskLog {
    /// The value of the `event` metadata key.
    enum Event: String {
        /// Every interceptor adapted the attempt; it is about to be sent.
        case adapted
        /// The attempt was sent and a response (any status) or an error came back.
        case sent
        /// The attempt waited for a slot of its host (``HostConcurrencyLimit``); `delay` says how long.
        case queued
        /// The attempt waited for a token of its host (``HostRateLimit``); `delay` says how long.
        case rateLimited = "rate_limited"
        /// The attempt had no response after the ``HedgingPolicy``'s delay: a hedge was sent
        /// (`delay`: how long after the first copy).
        case hedged
        /// A hedge was due, but the host's ``RetryBudget`` was spent: none was sent.
        case hedgeRefused = "hedge_refused"
        /// An interceptor asked for another attempt because this one failed.
        case retried
        /// An interceptor asked for the request to be sent again with changes (a new token).
        case replayed
        /// An interceptor asked for a retry, but the host's ``RetryBudget`` was spent: the outcome
        /// goes to the caller.
        case retryBudgetExhausted = "retry_budget_exhausted"
        /// The request's outcome goes to the manager (and its reactors).
        case completed
        /// A ``URLTaskReactor`` reacts to the outcome.
        case reacted
        /// A reactor requeued the task: it runs again.
        case requeued
    }

    let logger: Logger
    let task: URLTask

    func record(
        _ event: Event, attempt: Int? = nil, request: URLRequest? = nil,
        outcome: Result<URLTaskResponse, any Error>? = nil, by interceptor: (any URLTaskInterceptor)? = nil,
        delay: Duration? = nil, reactor: (any Reactor.Type)? = nil, handle: TaskHandle? = nil
    ) {
        var metadata: Logger.Metadata = [
            "event": .string(event.rawValue),
            "request": .string(String(task.requestID)),
        ]
        let shown = request ?? task.request
        metadata["method"] = .string(shown.httpMethod ?? "GET")
        metadata["url"] = .string(shown.url?.absoluteString ?? "-")
        if let attempt { metadata["attempt"] = .string(String(attempt)) }
        switch outcome {
        case .success(let response)?:
            metadata["status"] = .string(String(response.statusCode))
            metadata["bytes"] = .string(String(response.data.count))
        case .failure(let error)?:
            metadata["error"] = .string(String(describing: error))
        case nil:
            break
        }
        if let interceptor { metadata["by"] = .string(String(describing: type(of: interceptor))) }
        if let delay { metadata["delay"] = .string(String(describing: delay)) }
        if let reactor { metadata["reactor"] = .string(String(describing: reactor)) }
        if let handle { metadata["handle"] = .string(String(handle.identifier)) }
        logger.debug("\(event.rawValue)", metadata: metadata)
    }
}

extension BearerTokenAuthenticator: URLTaskInterceptor {
    /// Signs the request with the current credential, waiting for a refresh when needed.
    public func adapt(_ request: URLRequest, for task: URLTask, context: URLTaskContext) async throws -> URLRequest {
        try await authorize(request, transport: context.transport, refreshStarted: context.refreshStarted)
    }

    /// On `401`, waits for a credential newer than the one the request was signed with
    /// (refreshing once if needed), then asks for an immediate ``URLTaskRetryDecision/replay``
    /// (which does not count against any other interceptor's retry budget). After
    /// `maximumReplays` replays of the request, a `401` throws
    /// ``AuthenticationError/credentialRejected(replays:)``.
    public func retry(
        _ request: URLRequest, for task: URLTask, dueTo outcome: Result<URLTaskResponse, any Error>,
        context: URLTaskContext
    ) async throws -> URLTaskRetryDecision {
        guard case .success(let response) = outcome, response.statusCode == 401 else { return .doNotRetry }
        guard context.retriesMade < maximumReplays else {
            throw AuthenticationError.credentialRejected(replays: context.retriesMade)
        }
        try await handleUnauthorized(
            request, transport: context.transport, refreshStarted: context.refreshStarted
        )
        return .replay
    }
}

extension HTTPRetryPolicy: URLTaskInterceptor {
    /// Asks for a retry after the policy's delay when the outcome is retryable and the budget allows.
    public func retry(
        _ request: URLRequest, for task: URLTask, dueTo outcome: Result<URLTaskResponse, any Error>,
        context: URLTaskContext
    ) async throws -> URLTaskRetryDecision {
        guard
            let delay = delay(
                for: request, outcome: outcome.map(\.response), retriesMade: context.retriesMade,
                lastDelay: context.lastDelay, now: currentDate()
            )
        else { return .doNotRetry }
        return .retryAfter(delay)
    }
}

extension Duration {
    /// The whole milliseconds of a non-negative duration, for span attributes.
    var wholeMilliseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1_000 + Int(attoseconds / 1_000_000_000_000_000)
    }
}
