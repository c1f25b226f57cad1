import Foundation

/// How many times a failed operation is retried, and how long to wait before each retry.
///
/// Shared by ``MonoTask``, ``KeyedMonoTask`` and, in TaskKitHTTP, the HTTP retry policy and the
/// bearer authenticator's refresh.
///
/// - ``never``: one attempt, no retry.
/// - ``count(count:intervalProxy:)``: exactly `count` retries, so `count + 1` attempts in all.
/// - ``infinity(intervalProxy:)``: retry until success (or until the owner stops it).
///
/// An integer literal reads as a retry count: `0` is ``never``, `3` is three retries with no
/// delay between them.
///
/// ```swift
/// let retry: RetryCount = .count(
///     count: 3,
///     intervalProxy: .exponential(initial: .milliseconds(500), scaleRate: 2).capped(at: .seconds(5))
/// )
/// ```
public enum RetryCount: Sendable, Hashable, ExpressibleByIntegerLiteral {
    /// No retry: the first failure is final.
    case never
    /// Exactly `count` retries (`count + 1` attempts), waiting as `intervalProxy` says before each.
    case count(count: Int, intervalProxy: TaskKit.IntervalProxy = .fixed(.zero))
    /// Unlimited retries, waiting as `intervalProxy` says before each.
    case infinity(intervalProxy: TaskKit.IntervalProxy = .fixed(.zero))

    /// `0` is ``never``; `n > 0` is `.count(count: n)` with no delay. A negative literal is rejected.
    public init(integerLiteral value: Int) {
        precondition(value >= 0, "RetryCount: count must be >= 0, got \(value)")
        self = value == 0 ? .never : .count(count: value)
    }

    /// The maximum number of retries, or `nil` when unlimited.
    public var maximumRetries: Int? {
        switch self {
        case .never: return 0
        case .count(let count, _):
            precondition(count >= 0, "RetryCount: count must be >= 0, got \(count)")
            return count
        case .infinity: return nil
        }
    }

    /// The interval proxy, or `nil` for ``never``.
    public var intervalProxy: TaskKit.IntervalProxy? {
        switch self {
        case .never: return nil
        case .count(_, let proxy), .infinity(let proxy): return proxy
        }
    }

    /// Whether another retry is allowed after `retriesMade` retries have been made.
    public func allowsRetry(after retriesMade: Int) -> Bool {
        guard let maximumRetries else { return true }
        return retriesMade < maximumRetries
    }

    /// A fresh schedule that hands out the delay of each successive retry.
    public func makeSchedule() -> RetrySchedule {
        RetrySchedule(policy: self)
    }

    /// The delay before retry number `retry` (1-based), in seconds, or `nil` when this policy
    /// allows no such retry: the interval proxy's delay (jitter drawn from `generator`,
    /// decorrelated jitter from `previous`), raised to `minimum` when one is given, and bounded
    /// by the proxy's cap or, when it has none, by `ceiling`.
    ///
    /// The one clamp of every retry delay: ``RetrySchedule`` steps through it, and the HTTP retry
    /// policy asks it directly with a server's `Retry-After` as the minimum.
    package func delay(
        forRetry retry: Int,
        previous: TimeInterval?,
        atLeast minimum: TimeInterval? = nil,
        ceiling: TimeInterval = .greatestFiniteMagnitude,
        using generator: inout some RandomNumberGenerator
    ) -> TimeInterval? {
        guard allowsRetry(after: retry - 1), let proxy = intervalProxy else { return nil }
        var interval = proxy.seconds(forRetry: retry, previous: previous, using: &generator)
        if let minimum { interval = max(interval, minimum) }
        return min(interval, proxy.maximumSeconds ?? ceiling)
    }
}

/// The running state of one retry sequence: how many retries were made and the last delay.
///
/// A value type with no locking: the owner keeps it inside its own state (a state machine, a
/// task) and asks it, after each failure, whether and how long to wait.
///
/// ```swift
/// var schedule = RetryCount.count(count: 2, intervalProxy: .fixed(.seconds(1))).makeSchedule()
/// schedule.nextDelay() // 1 s
/// schedule.nextDelay() // 1 s
/// schedule.nextDelay() // nil: no retries left
/// ```
public struct RetrySchedule: Sendable, Hashable {
    /// The policy this schedule follows.
    public let policy: RetryCount
    /// The number of retries handed out so far.
    public private(set) var retriesMade: Int = 0
    /// The last delay handed out.
    public private(set) var lastDelay: Duration?

    /// Creates a schedule at its start.
    public init(policy: RetryCount) {
        _ = policy.maximumRetries  // validates a negative count early
        self.policy = policy
    }

    /// A schedule of `policy` that has handed out `retriesMade` retries, the last after
    /// `lastDelay`: what a caller that keeps only those two (not the policy) resumes from.
    @usableFromInline
    init(policy: RetryCount, retriesMade: Int, lastDelay: Duration?) {
        self.policy = policy
        self.retriesMade = retriesMade
        self.lastDelay = lastDelay
    }

    /// Whether another retry is allowed.
    public var canRetry: Bool { policy.allowsRetry(after: retriesMade) }

    /// Consumes one retry and returns the delay before it, or `nil` when no retry is left.
    public mutating func nextDelay() -> Duration? {
        var generator = SystemRandomNumberGenerator()
        return nextDelay(using: &generator)
    }

    /// Consumes one retry and returns the delay before it, drawing jitter from `generator`.
    public mutating func nextDelay(using generator: inout some RandomNumberGenerator) -> Duration? {
        consumeRetry(atLeast: nil, using: &generator)
    }

    /// Consumes one retry with an explicit minimum delay (for example a server's `Retry-After`),
    /// still bounded by the proxy's cap. Returns `nil` when no retry is left.
    public mutating func nextDelay(atLeast minimum: Duration) -> Duration? {
        var generator = SystemRandomNumberGenerator()
        return consumeRetry(atLeast: minimum.timeInterval, using: &generator)
    }

    /// Consumes one retry: the delay of `RetryCount.delay(forRetry:previous:atLeast:ceiling:using:)`,
    /// with `minimum` in seconds.
    mutating func consumeRetry(
        atLeast minimum: TimeInterval?, using generator: inout some RandomNumberGenerator
    ) -> Duration? {
        guard let interval = policy.delay(
            forRetry: retriesMade + 1, previous: lastDelay?.timeInterval, atLeast: minimum, using: &generator
        ) else { return nil }
        retriesMade += 1
        let delay = Duration(timeInterval: interval)
        lastDelay = delay
        return delay
    }
}
