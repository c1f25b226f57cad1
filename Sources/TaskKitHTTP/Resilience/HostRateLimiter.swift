import CoreMetrics
import Logging
import TaskKit

/// The buckets of one ``URLTaskManager`` with `rateLimit:`: a ``HostRateLimitStateMachine``
/// under one lock, its time read from the manager's clock as the duration since the limiter was
/// made. A waiting attempt sleeps on the clock (nothing is held while it sleeps); metrics and
/// logs are recorded after unlocking.
final class HostRateLimiter: Sendable {
    typealias Machine = HostRateLimitStateMachine

    /// The swift-metrics objects, with a `metricsLabel`.
    struct Metrics: Sendable {
        /// `taskkit_http_rate_limit_tokens`: tokens taken (attempts let through).
        let tokens: Counter
        /// `taskkit_http_rate_limit_waiting`: attempts waiting for a token, every host together.
        let waiting: Meter
        /// `taskkit_http_rate_limit_wait`: how long an attempt that had to wait for its token waited.
        let wait: CoreMetrics.Timer
        /// `taskkit_http_rate_limit_rejections`: attempts refused because no token came within `maximumWait`.
        let rejections: Counter
        /// `taskkit_http_host_pauses`: pauses a `Retry-After` imposed on (or extended for) a host.
        let pauses: Counter

        init(label: String) {
            let name = ("name", label)
            tokens = Counter(label: "taskkit_http_rate_limit_tokens", dimensions: [name])
            waiting = Meter(label: "taskkit_http_rate_limit_waiting", dimensions: [name])
            wait = CoreMetrics.Timer(label: "taskkit_http_rate_limit_wait", dimensions: [name])
            rejections = Counter(label: "taskkit_http_rate_limit_rejections", dimensions: [name])
            pauses = Counter(label: "taskkit_http_host_pauses", dimensions: [name])
        }
    }

    let limit: HostRateLimit
    private let state: LockedState<Machine>
    private let clock: any Clock<Duration>
    private let elapsed: @Sendable () -> Duration
    private let logger: Logger
    private let metrics: Metrics?

    init(limit: HostRateLimit, clock: any Clock<Duration>, logger: Logger, metricsLabel: String?) {
        self.limit = limit
        self.state = LockedState(Machine(limit: limit))
        self.clock = clock
        self.elapsed = startStopwatch(on: clock)
        self.logger = logger
        self.metrics = metricsLabel.map(Metrics.init(label:))
    }

    /// Hosts with a bucket (for tests).
    var hostCount: Int { state.withLock { $0.hosts.count } }

    /// Whether `host` is paused now (for tests).
    func isPaused(_ host: String) -> Bool {
        let now = elapsed()
        return state.withLock { $0.isPaused(host, now: now) }
    }

    /// Takes a token of `host`, waiting for it when the bucket is empty or the host paused.
    /// Returns how long it waited on the clock, `nil` when a token was there at once.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled while it waits (its token
    ///   goes back when nobody reserved after it), ``URLTaskError/rateLimited(host:retryIn:)``
    ///   when no token would come within the limit's `maximumWait`.
    func acquire(host: String) async throws -> Duration? {
        let start = elapsed()
        let reservation = state.withLock { $0.reserve(host: host, now: start) }
        switch reservation {
        case .now:
            metrics?.tokens.increment()
            return nil
        case .rejected(let retryIn):
            metrics?.rejections.increment()
            throw URLTaskError.rateLimited(host: host, retryIn: retryIn)
        case .wait(var ticket):
            metrics?.waiting.increment()
            defer { metrics?.waiting.decrement() }
            var delay: Duration? = ticket.sendAt - start
            do {
                while let wait = delay {
                    try await clock.sleep(for: wait)
                    let now = elapsed()
                    delay = state.withLock { $0.proceed(&ticket, now: now) }
                }
            } catch {
                state.withLock { $0.cancel(ticket) }
                throw error
            }
            let waited = elapsed() - start
            metrics?.tokens.increment()
            metrics?.wait.record(waited)
            return waited
        }
    }

    /// `host` answered `429` or `503` with a `Retry-After` of `delay`: pauses its bucket (cut to
    /// the limit's `maximumPause`). Returns the pause's length from now when it began or grew
    /// the host's pause, `nil` when the host was already paused for longer.
    @discardableResult
    func pause(host: String, for delay: Duration) -> Duration? {
        let now = elapsed()
        guard let until = state.withLock({ $0.pause(host: host, for: delay, now: now) }) else { return nil }
        metrics?.pauses.increment()
        let length = until - now
        logger.debug("host_paused", metadata: ["event": "host_paused", "host": .string(host), "delay": .string("\(length)")])
        return length
    }
}
