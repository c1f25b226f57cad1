import CoreMetrics
import Foundation
import Logging
import TaskKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The flights of one ``URLTaskManager`` with `coalescing:`: a ``RequestCoalescingStateMachine``
/// under one lock, each flight's task, and each caller's deadline. Continuations are resumed and
/// flights started or cancelled only after the lock is released.
final class RequestCoalescer: Sendable {
    /// A caller: its continuation, how to start a flight with its request, and (with a tracer)
    /// its trace context, the parent of a flight it starts.
    struct Waiter: Sendable {
        let continuation: CheckedContinuation<URLTaskResponse, any Error>
        let start: @Sendable () async throws -> URLTaskResponse
        let context: TaskTraceContext?
    }

    typealias Machine = RequestCoalescingStateMachine<RequestFlightKey, Waiter>

    private struct State {
        var machine = Machine()
        var nextCaller: UInt64 = 0
        /// The task of each running flight, by flight id.
        var tasks: [UInt64: Task<Void, Never>] = [:]
        /// With a tracer: the context of each running flight's span, by flight id.
        var spans: [UInt64: TaskTraceContext] = [:]
    }

    let configuration: URLTaskCoalescing
    private let state = LockedState(State())
    private let clock: any Clock<Duration>
    private let logger: Logger
    /// `taskkit_http_coalesced_requests`, with a `metricsLabel`: callers that joined a flight.
    private let joinedCounter: Counter?
    /// The tracing seam; `nil` without tracing.
    private let tracer: (any TaskTracer)?

    init(
        configuration: URLTaskCoalescing, clock: any Clock<Duration>, logger: Logger, metricsLabel: String?,
        tracer: (any TaskTracer)? = nil
    ) {
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        self.tracer = tracer
        self.joinedCounter = metricsLabel.map {
            Counter(label: "taskkit_http_coalesced_requests", dimensions: [("name", $0)])
        }
    }

    /// How many flights are running (for tests).
    var flightCount: Int { state.withLock { $0.machine.flights.count } }

    /// How many callers wait for a flight, queued ones included (for tests).
    var waitingCallers: Int {
        state.withLock { $0.machine.flights.values.reduce(0) { $0 + $1.waiters.count + $1.queued.count } }
    }

    /// The response of the flight `key` belongs to: joins the running one, or starts one with
    /// `start`. Leaves with `CancellationError` when the calling task is cancelled, and with
    /// `TaskError.timedOut` after `timeout` on the manager's clock; the flight goes on for the
    /// callers that remain, and is cancelled when none does.
    func response(
        for request: URLRequest, key: RequestFlightKey, timeout: Duration?,
        start: @escaping @Sendable () async throws -> URLTaskResponse
    ) async throws -> URLTaskResponse {
        let id = state.withLock { state -> UInt64 in
            state.nextCaller += 1
            return state.nextCaller
        }
        var deadline: Task<Void, Never>?
        var joinSpan: (any TaskSpan)?
        defer {
            deadline?.cancel()
            joinSpan?.end()
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let joiner = tracer?.currentContext()
                // `nil`: the task was cancelled before the caller could join (the cancellation
                // handler then found nothing to remove), so it must not wait.
                let (action, flightSpan) = state.withLock { state -> (Machine.JoinAction?, TaskTraceContext?) in
                    if Task.isCancelled { return (nil, nil) }
                    let action = state.machine.join(key: key, id: id, waiter: Waiter(continuation: continuation, start: start, context: joiner))
                    guard case .joined(let flight) = action else { return (action, nil) }
                    return (action, state.spans[flight])
                }
                switch action {
                case nil:
                    continuation.resume(throwing: CancellationError())
                    return
                case .start(let flight):
                    launch(flight, key: key, start: start, parent: joiner)
                case .joined(let flight):
                    joinedCounter?.increment()
                    if let tracer {
                        // The caller's own span, linked to the flight it waits for (a caller that
                        // joins in the instant before the flight's span is recorded finds it by
                        // the flight id alone).
                        let span = tracer.startSpan("HTTP coalesced", kind: .internal, parent: joiner)
                        span.setAttribute("taskkit.http.flight", Int(truncatingIfNeeded: flight))
                        if let flightSpan { span.addLink(to: flightSpan) }
                        joinSpan = span
                    }
                    if logger.logLevel <= .debug {
                        logger.debug("joined", metadata: [
                            "event": "joined", "flight": .string(String(flight)),
                            "method": .string(request.httpMethod ?? "GET"), "url": .string(request.url?.absoluteString ?? "-"),
                        ])
                    }
                case .queued:
                    break
                }
                if let timeout {
                    deadline = Task { [self, clock] in
                        do {
                            try await clock.sleep(for: timeout)
                        } catch {
                            return  // answered first: the deadline was cancelled
                        }
                        leave(key: key, id: id, with: TaskError.timedOut)
                    }
                }
            }
        } onCancel: {
            leave(key: key, id: id, with: CancellationError())
        }
    }

    /// Caller `id` leaves with `error`; its flight is cancelled if it was the last caller.
    private func leave(key: RequestFlightKey, id: UInt64, with error: any Error) {
        let (waiter, abandoned) = state.withLock { state in
            let (waiter, abandon) = state.machine.leave(key: key, id: id)
            return (waiter, abandon.flatMap { state.tasks.removeValue(forKey: $0) })
        }
        waiter?.continuation.resume(throwing: error)
        if let abandoned {
            logger.debug("flight abandoned: no caller waits for it", metadata: ["event": "abandoned"])
            abandoned.cancel()
        }
    }

    /// Starts flight `flight` in a task of its own (it belongs to no caller: no single caller's
    /// cancellation ends it). With a tracer, the flight is a span (`HTTP flight`, a child of the
    /// caller that started it), which the callers that join it link to.
    private func launch(
        _ flight: UInt64, key: RequestFlightKey, start: @escaping @Sendable () async throws -> URLTaskResponse,
        parent: TaskTraceContext?
    ) {
        let span = tracer?.startSpan("HTTP flight", kind: .internal, parent: parent)
        span?.setAttribute("taskkit.http.flight", Int(truncatingIfNeeded: flight))
        if let span {
            // Recorded before the flight's task exists: a caller that joins once the flight is
            // under way links to it. The task's `finish` removes it, abandoned or not.
            state.withLock { $0.spans[flight] = span.context }
        }
        let task = Task { [self] in
            let result: Result<URLTaskResponse, any Error>
            do {
                if let span {
                    result = .success(try await span.withCurrent(isolation: nil) { try await start() })
                } else {
                    result = .success(try await start())
                }
            } catch {
                span?.recordFailure(error)
                result = .failure(error)
            }
            let callers = finish(flight, key: key, result)
            span?.setAttribute("taskkit.http.callers", callers)
            span?.end()
        }
        let running = state.withLock { state -> Bool in
            guard let current = state.machine.flights[key], current.id == flight, !current.abandoned else { return false }
            state.tasks[flight] = task
            return true
        }
        // Abandoned (or finished) before its task was recorded: cancelling a finished task does nothing.
        if !running { task.cancel() }
    }

    /// Flight `flight` ended: answers its callers, and starts the next flight for the callers
    /// queued behind it, if any. Returns how many callers it answered.
    @discardableResult
    private func finish(_ flight: UInt64, key: RequestFlightKey, _ result: Result<URLTaskResponse, any Error>) -> Int {
        let (waiters, next) = state.withLock { state in
            state.tasks[flight] = nil
            state.spans[flight] = nil
            return state.machine.finish(key: key, flight: flight)
        }
        for waiter in waiters { waiter.continuation.resume(with: result) }
        if let next { launch(next.flight, key: key, start: next.starter.start, parent: next.starter.context) }
        return waiters.count
    }
}
