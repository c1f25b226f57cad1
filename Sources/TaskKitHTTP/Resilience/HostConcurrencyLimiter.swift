import CoreMetrics
import TaskKit

/// The slots of one ``URLTaskManager`` with `hostConcurrency:`: a
/// ``HostConcurrencyStateMachine`` under one lock. Continuations are resumed and metrics
/// recorded only after the lock is released.
final class HostConcurrencyLimiter: Sendable {
    typealias Machine = HostConcurrencyStateMachine<CheckedContinuation<Void, any Error>>

    private struct State {
        var machine: Machine
        var nextWaiter: UInt64 = 0
    }

    /// The swift-metrics objects, with a `metricsLabel`.
    struct Metrics: Sendable {
        /// `taskkit_http_host_queued`: attempts waiting for a slot, every host together.
        let queued: Meter
        /// `taskkit_http_host_queue_wait`: how long an attempt that had to wait waited.
        let wait: CoreMetrics.Timer
        /// `taskkit_http_host_queue_rejections`: attempts refused because their host's queue was full.
        let rejections: Counter

        init(label: String) {
            let name = ("name", label)
            queued = Meter(label: "taskkit_http_host_queued", dimensions: [name])
            wait = CoreMetrics.Timer(label: "taskkit_http_host_queue_wait", dimensions: [name])
            rejections = Counter(label: "taskkit_http_host_queue_rejections", dimensions: [name])
        }
    }

    let limit: HostConcurrencyLimit
    private let state: LockedState<State>
    private let clock: any Clock<Duration>
    private let metrics: Metrics?

    init(limit: HostConcurrencyLimit, clock: any Clock<Duration>, metricsLabel: String?) {
        self.limit = limit
        self.state = LockedState(State(machine: Machine(limit: limit)))
        self.clock = clock
        self.metrics = metricsLabel.map(Metrics.init(label:))
    }

    /// Hosts with an attempt in flight or waiting (for tests).
    var hostCount: Int { state.withLock { $0.machine.hosts.count } }

    /// Attempts waiting for `host` (for tests).
    func waiting(for host: String) -> Int { state.withLock { $0.machine.waiting(for: host) } }

    /// Attempts in flight to `host` (for tests).
    func inFlight(to host: String) -> Int { state.withLock { $0.machine.inFlight(to: host) } }

    /// Takes a slot of `host`, waiting for one in the host's queue when all are taken; the
    /// caller gives it back with ``release(host:)``. Returns how long it waited on the clock,
    /// `nil` when it took a free slot at once.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled before it has a slot
    ///   (it then holds none), ``URLTaskError/hostQueueFull(host:maximumQueued:)`` when the
    ///   host's queue is full.
    func acquire(host: String) async throws -> Duration? {
        let id = state.withLock { state -> UInt64? in
            if state.machine.acquireAtOnce(host: host) { return nil }
            state.nextWaiter += 1
            return state.nextWaiter
        }
        guard let id else { return nil }
        let elapsed = startStopwatch(on: clock)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // `nil`: the task was cancelled before the attempt could queue (the cancellation
                // handler then found nothing to remove), so it must not wait.
                let action = state.withLock { state -> Machine.AcquireAction? in
                    if Task.isCancelled { return nil }
                    return state.machine.acquire(host: host, id: id, waiter: continuation)
                }
                switch action {
                case nil:
                    continuation.resume(throwing: CancellationError())
                case .granted:
                    continuation.resume()
                case .queued:
                    metrics?.queued.increment()
                case .rejected:
                    metrics?.rejections.increment()
                    continuation.resume(throwing: URLTaskError.hostQueueFull(host: host, maximumQueued: limit.maximumQueued))
                }
            }
        } onCancel: {
            let waiter = state.withLock { $0.machine.leave(host: host, id: id) }
            if let waiter {
                metrics?.queued.decrement()
                waiter.resume(throwing: CancellationError())
            }
        }
        let waited = elapsed()
        metrics?.wait.record(waited)
        if Task.isCancelled {
            // Granted in the instant the caller was cancelled: nothing is sent.
            release(host: host)
            throw CancellationError()
        }
        return waited
    }

    /// Gives back a slot of `host` taken by ``acquire(host:)``: the first attempt waiting for
    /// the host takes it.
    func release(host: String) {
        guard let next = state.withLock({ $0.machine.release(host: host) }) else { return }
        metrics?.queued.decrement()
        next.resume()
    }
}
