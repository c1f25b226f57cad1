import Foundation

/// How long to wait before each retry: a growth rule, an optional cap and optional jitter.
///
/// `IntervalProxy` is the one backoff model of TaskKit: ``MonoTask``, ``KeyedMonoTask`` and, in
/// TaskKitHTTP, the HTTP retry policy and the bearer authenticator's refresh all use it through
/// ``RetryCount``.
///
/// ```swift
/// // 1 s, 2 s, 4 s, 8 s, then 10 s for every later retry, each randomised in 0...delay.
/// let backoff = IntervalProxy
///     .exponentialBackoff(initialTimeInterval: 1, scaleRate: 2)
///     .capped(at: 10)
///     .jittered(.full)
/// ```
///
/// Out-of-range values are clamped to the nearest valid one, so a configuration mistake never
/// crashes an app: a negative interval, cap or count is 0, and a
/// scale rate below 1 acts as 1 (the delay never shrinks). Values with no nearest valid one (NaN,
/// or a positive infinity) are rejected with a precondition failure that names the parameter
/// and the value. The stored ``growth`` and ``maximumTimeInterval`` hold the clamped values.
public struct IntervalProxy: Sendable, Hashable {
    /// How the base delay grows from one retry to the next.
    public enum Growth: Sendable, Hashable {
        /// The same delay before every retry.
        case fixed(TimeInterval)
        /// `initial * scaleRate^(retry - 1)` before retry number `retry` (1-based).
        case exponential(initial: TimeInterval, scaleRate: Double)
        /// Exponential for the first `exponentialRetries + 1` retries (`initial`, `initial *
        /// scaleRate`, …), then `fixed` before every later retry.
        case exponentialThenFixed(initial: TimeInterval, scaleRate: Double, exponentialRetries: Int, fixed: TimeInterval)
        /// `first` before the first retry, `fixed` before each of the next `fixedRetries`, then
        /// exponential growth by `scaleRate` from the last of those delays (`fixed`, or `first`
        /// when `fixedRetries` is 0).
        case fixedThenExponential(first: TimeInterval, fixed: TimeInterval, fixedRetries: Int, scaleRate: Double)
    }

    /// The default delay before the first retry of the exponential strategies: 1 second.
    public static let defaultInitialTimeInterval: TimeInterval = 1
    /// The default growth factor of the exponential strategies: 2.
    public static let defaultScaleRate: Double = 2

    /// Randomisation applied to each computed delay, to keep many clients from retrying in step.
    public enum Jitter: Sendable, Hashable {
        /// No randomisation: the delay is exactly the computed one.
        case none
        /// "Full jitter": a uniformly random delay in `0...computed`.
        case full
        /// "Decorrelated jitter": a uniformly random delay in `base...(previous * 3)`, where
        /// `base` is the first delay of the growth rule; still bounded by the cap.
        case decorrelated
    }

    /// How the base delay grows.
    public let growth: Growth
    /// The largest delay ever returned, in seconds; `nil` for no cap.
    public let maximumTimeInterval: TimeInterval?
    /// The randomisation applied to each delay.
    public let jitter: Jitter

    /// Creates an interval proxy from its parts; prefer the static factories.
    ///
    /// - Parameters:
    ///   - growth: How the base delay grows.
    ///   - maximumTimeInterval: The cap in seconds, or `nil` for none; a negative value is 0.
    ///   - jitter: The randomisation to apply.
    public init(growth: Growth, maximumTimeInterval: TimeInterval? = nil, jitter: Jitter = .none) {
        switch growth {
        case .fixed(let interval):
            self.growth = .fixed(Self.clampInterval(interval, name: "timeInterval"))
        case .exponential(let initial, let scaleRate):
            self.growth = .exponential(
                initial: Self.clampInterval(initial, name: "initialTimeInterval"),
                scaleRate: Self.clampRate(scaleRate)
            )
        case .exponentialThenFixed(let initial, let scaleRate, let exponentialRetries, let fixed):
            self.growth = .exponentialThenFixed(
                initial: Self.clampInterval(initial, name: "initialTimeInterval"),
                scaleRate: Self.clampRate(scaleRate),
                exponentialRetries: max(exponentialRetries, 0),
                fixed: Self.clampInterval(fixed, name: "originalInitialInterval")
            )
        case .fixedThenExponential(let first, let fixed, let fixedRetries, let scaleRate):
            self.growth = .fixedThenExponential(
                first: Self.clampInterval(first, name: "initialTimeInterval"),
                fixed: Self.clampInterval(fixed, name: "originalInitialInterval"),
                fixedRetries: max(fixedRetries, 0),
                scaleRate: Self.clampRate(scaleRate)
            )
        }
        self.maximumTimeInterval = maximumTimeInterval.map { Self.clampInterval($0, name: "maximumTimeInterval") }
        self.jitter = jitter
    }

    /// The same delay before every retry.
    ///
    /// - Parameter timeInterval: The delay in seconds; a negative value is 0. Defaults to 0.
    public static func fixed(timeInterval: TimeInterval = 0) -> IntervalProxy {
        IntervalProxy(growth: .fixed(timeInterval))
    }

    /// A delay that starts at `initialTimeInterval` and is multiplied by `scaleRate` after each retry.
    ///
    /// - Parameters:
    ///   - initialTimeInterval: The delay before the first retry, in seconds; a negative value is 0.
    ///     Defaults to ``defaultInitialTimeInterval`` (1 s).
    ///   - scaleRate: The growth factor; a value below 1 acts as 1. Defaults to
    ///     ``defaultScaleRate`` (2).
    ///   - maximumTimeInterval: An optional cap in seconds; a negative value is 0.
    ///   - jitter: Optional randomisation. Defaults to none.
    public static func exponentialBackoff(
        initialTimeInterval: TimeInterval = defaultInitialTimeInterval,
        scaleRate: Double = defaultScaleRate,
        maximumTimeInterval: TimeInterval? = nil,
        jitter: Jitter = .none
    ) -> IntervalProxy {
        IntervalProxy(
            growth: .exponential(initial: initialTimeInterval, scaleRate: scaleRate),
            maximumTimeInterval: maximumTimeInterval,
            jitter: jitter
        )
    }

    /// Exponential backoff for a number of retries, then a fixed delay.
    ///
    /// The delays are `initialTimeInterval * scaleRate^(k - 1)` for retries `k = 1 …
    /// maxExponentialBackoffCount + 1`, then `originalInitialInterval` before every later retry.
    /// With `initialTimeInterval: 1, maxExponentialBackoffCount: 2, scaleRate: 2`: 1 s, 2 s, 4 s,
    /// then 1 s for ever.
    ///
    /// - Parameters:
    ///   - initialTimeInterval: The first delay, in seconds; a negative value is 0.
    ///   - originalInitialInterval: The fixed delay after the exponential phase; a negative value is 0.
    ///   - maxExponentialBackoffCount: How many retries after the first still grow; a negative value is 0.
    ///   - scaleRate: The growth factor; a value below 1 acts as 1.
    public static func exponentialBackoffBeforeFixed(
        initialTimeInterval: TimeInterval = defaultInitialTimeInterval,
        originalInitialInterval: TimeInterval = defaultInitialTimeInterval,
        maxExponentialBackoffCount: Int = 0,
        scaleRate: Double = defaultScaleRate
    ) -> IntervalProxy {
        IntervalProxy(
            growth: .exponentialThenFixed(
                initial: initialTimeInterval, scaleRate: scaleRate,
                exponentialRetries: maxExponentialBackoffCount, fixed: originalInitialInterval
            )
        )
    }

    /// A fixed delay for a number of retries, then exponential backoff.
    ///
    /// The delays are `initialTimeInterval` before the first retry, `originalInitialInterval`
    /// before each of the next `maxFixedCount`, then growth by `scaleRate` from the last of those.
    /// With `initialTimeInterval: 1, originalInitialInterval: 1, maxFixedCount: 2, scaleRate: 2`:
    /// 1 s, 1 s, 1 s, 2 s, 4 s, …
    ///
    /// - Parameters:
    ///   - initialTimeInterval: The first delay, in seconds; a negative value is 0.
    ///   - originalInitialInterval: The fixed delay of the fixed phase; a negative value is 0.
    ///   - maxFixedCount: How many retries after the first use the fixed delay; a negative value is 0.
    ///   - scaleRate: The growth factor of the exponential phase; a value below 1 acts as 1.
    public static func exponentialBackoffAfterFixed(
        initialTimeInterval: TimeInterval = defaultInitialTimeInterval,
        originalInitialInterval: TimeInterval = defaultInitialTimeInterval,
        maxFixedCount: Int = 0,
        scaleRate: Double = defaultScaleRate
    ) -> IntervalProxy {
        IntervalProxy(
            growth: .fixedThenExponential(
                first: initialTimeInterval, fixed: originalInitialInterval,
                fixedRetries: maxFixedCount, scaleRate: scaleRate
            )
        )
    }

    /// This proxy with its delays capped at `maximumTimeInterval` seconds.
    public func capped(at maximumTimeInterval: TimeInterval) -> IntervalProxy {
        IntervalProxy(growth: growth, maximumTimeInterval: maximumTimeInterval, jitter: jitter)
    }

    /// This proxy with the given jitter.
    public func jittered(_ jitter: Jitter) -> IntervalProxy {
        IntervalProxy(growth: growth, maximumTimeInterval: maximumTimeInterval, jitter: jitter)
    }

    /// The delay before retry number `retry` (1-based) without jitter, after the cap.
    ///
    /// - Parameter retry: The 1-based retry number; values below 1 are treated as 1.
    public func baseTimeInterval(forRetry retry: Int) -> TimeInterval {
        let raw: TimeInterval
        switch growth {
        case .fixed(let interval):
            raw = interval
        case .exponential(let initial, let scaleRate):
            raw = Self.grow(initial, by: scaleRate, times: retry - 1)
        case .exponentialThenFixed(let initial, let scaleRate, let exponentialRetries, let fixed):
            raw = retry <= exponentialRetries + 1 ? Self.grow(initial, by: scaleRate, times: retry - 1) : fixed
        case .fixedThenExponential(let first, let fixed, let fixedRetries, let scaleRate):
            if retry <= 1 {
                raw = first
            } else if retry <= fixedRetries + 1 {
                raw = fixed
            } else {
                raw = Self.grow(fixedRetries > 0 ? fixed : first, by: scaleRate, times: retry - 1 - fixedRetries)
            }
        }
        return min(raw, maximumTimeInterval ?? .greatestFiniteMagnitude)
    }

    /// The delay before retry number `retry` (1-based), with jitter and the cap applied.
    ///
    /// - Parameters:
    ///   - retry: The 1-based retry number.
    ///   - previous: The delay returned for the previous retry; used by decorrelated jitter.
    ///   - generator: The random source for jitter.
    public func timeInterval(
        forRetry retry: Int,
        previous: TimeInterval? = nil,
        using generator: inout some RandomNumberGenerator
    ) -> TimeInterval {
        let base = baseTimeInterval(forRetry: retry)
        let cap = maximumTimeInterval ?? .greatestFiniteMagnitude
        switch jitter {
        case .none:
            return base
        case .full:
            return base > 0 ? TimeInterval.random(in: 0...base, using: &generator) : 0
        case .decorrelated:
            let floor = baseTimeInterval(forRetry: 1)
            let upper = min(cap, max(floor, (previous ?? floor) * 3))
            return upper > floor ? TimeInterval.random(in: floor...upper, using: &generator) : floor
        }
    }

    /// ``timeInterval(forRetry:previous:using:)`` with the system random generator.
    public func timeInterval(forRetry retry: Int, previous: TimeInterval? = nil) -> TimeInterval {
        var generator = SystemRandomNumberGenerator()
        return timeInterval(forRetry: retry, previous: previous, using: &generator)
    }

    /// `value * scaleRate^times` (`times` below 0 counts as 0), saturating at the largest finite
    /// interval instead of overflowing to infinity.
    private static func grow(_ value: TimeInterval, by scaleRate: Double, times: Int) -> TimeInterval {
        let exponent = Double(min(max(times, 0), 1024))
        let grown = value * Foundation.pow(scaleRate, exponent)
        return grown.isFinite ? grown : .greatestFiniteMagnitude
    }

    /// A negative interval is 0; NaN and positive infinity have no nearest valid value and trap.
    private static func clampInterval(_ value: TimeInterval, name: String) -> TimeInterval {
        precondition(
            !value.isNaN && value != .infinity,
            "IntervalProxy: \(name) must be a finite number of seconds, got \(value)"
        )
        return max(value, 0)
    }

    /// A rate below 1 acts as 1; NaN and positive infinity trap.
    private static func clampRate(_ scaleRate: Double) -> Double {
        precondition(
            !scaleRate.isNaN && scaleRate != .infinity,
            "IntervalProxy: scaleRate must be a finite number, got \(scaleRate)"
        )
        return max(scaleRate, 1)
    }
}

extension Duration {
    /// A duration from a `TimeInterval` in seconds, saturating instead of trapping on huge values.
    package init(timeInterval: TimeInterval) {
        if !(timeInterval > 0) {
            self = .zero
        } else if timeInterval >= Double(Int64.max / 2) {
            self = .seconds(Int64.max / 2)
        } else {
            let whole = timeInterval.rounded(.down)
            let attoseconds = (timeInterval - whole) * 1e18
            self = .seconds(Int64(whole)) + Duration(secondsComponent: 0, attosecondsComponent: Int64(attoseconds))
        }
    }

    /// This duration in seconds as a `TimeInterval`.
    package var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
