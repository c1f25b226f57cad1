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
///     .exponential(initial: .seconds(1), scaleRate: 2)
///     .capped(at: .seconds(10))
///     .jittered(.full)
/// ```
///
/// Out-of-range values are clamped to the nearest valid one, so a configuration mistake never
/// crashes an app: a negative delay, cap or count is 0, and a scale rate below 1 acts as 1 (the
/// delay never shrinks). A scale rate with no nearest valid value (NaN, or a positive infinity)
/// is rejected with a precondition failure that names the parameter and the value. The stored
/// ``growth`` and ``maximumDelay`` hold the clamped values.
public struct IntervalProxy: Sendable, Hashable {
    /// How the base delay grows from one retry to the next.
    public enum Growth: Sendable, Hashable {
        /// The same delay before every retry.
        case fixed(Duration)
        /// `initial * scaleRate^(retry - 1)` before retry number `retry` (1-based).
        case exponential(initial: Duration, scaleRate: Double)
        /// Exponential for the first `exponentialRetries + 1` retries (`initial`, `initial *
        /// scaleRate`, …), then `fixed` before every later retry.
        case exponentialThenFixed(initial: Duration, scaleRate: Double, exponentialRetries: Int, fixed: Duration)
        /// `first` before the first retry, `fixed` before each of the next `fixedRetries`, then
        /// exponential growth by `scaleRate` from the last of those delays (`fixed`, or `first`
        /// when `fixedRetries` is 0).
        case fixedThenExponential(first: Duration, fixed: Duration, fixedRetries: Int, scaleRate: Double)
    }

    /// The default delay before the first retry of the exponential strategies: 1 second.
    public static let defaultInitialDelay: Duration = .seconds(1)
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
    /// The largest delay ever returned; `nil` for no cap.
    public let maximumDelay: Duration?
    /// The randomisation applied to each delay.
    public let jitter: Jitter

    /// Creates an interval proxy from its parts; prefer the static factories.
    ///
    /// - Parameters:
    ///   - growth: How the base delay grows; negative delays and counts are 0, a scale rate
    ///     below 1 is 1.
    ///   - maximumDelay: The cap, or `nil` for none; a negative value is 0.
    ///   - jitter: The randomisation to apply.
    public init(growth: Growth, maximumDelay: Duration? = nil, jitter: Jitter = .none) {
        switch growth {
        case .fixed(let delay):
            self.growth = .fixed(max(delay, .zero))
        case .exponential(let initial, let scaleRate):
            self.growth = .exponential(initial: max(initial, .zero), scaleRate: Self.clampRate(scaleRate))
        case .exponentialThenFixed(let initial, let scaleRate, let exponentialRetries, let fixed):
            self.growth = .exponentialThenFixed(
                initial: max(initial, .zero),
                scaleRate: Self.clampRate(scaleRate),
                exponentialRetries: max(exponentialRetries, 0),
                fixed: max(fixed, .zero)
            )
        case .fixedThenExponential(let first, let fixed, let fixedRetries, let scaleRate):
            self.growth = .fixedThenExponential(
                first: max(first, .zero),
                fixed: max(fixed, .zero),
                fixedRetries: max(fixedRetries, 0),
                scaleRate: Self.clampRate(scaleRate)
            )
        }
        self.maximumDelay = maximumDelay.map { max($0, .zero) }
        self.jitter = jitter
    }

    /// The same delay before every retry.
    ///
    /// - Parameter delay: The delay; a negative value is 0.
    public static func fixed(_ delay: Duration) -> IntervalProxy {
        IntervalProxy(growth: .fixed(delay))
    }

    /// A delay that starts at `initial` and is multiplied by `scaleRate` after each retry.
    ///
    /// - Parameters:
    ///   - initial: The delay before the first retry; a negative value is 0. Defaults to
    ///     ``defaultInitialDelay`` (1 s).
    ///   - scaleRate: The growth factor; a value below 1 acts as 1. Defaults to
    ///     ``defaultScaleRate`` (2).
    ///   - maximumDelay: An optional cap; a negative value is 0.
    ///   - jitter: Optional randomisation. Defaults to none.
    public static func exponential(
        initial: Duration = defaultInitialDelay,
        scaleRate: Double = defaultScaleRate,
        maximumDelay: Duration? = nil,
        jitter: Jitter = .none
    ) -> IntervalProxy {
        IntervalProxy(
            growth: .exponential(initial: initial, scaleRate: scaleRate), maximumDelay: maximumDelay, jitter: jitter
        )
    }

    /// Exponential backoff for a number of retries, then a fixed delay.
    ///
    /// The delays are `initial * scaleRate^(k - 1)` for retries `k = 1 … exponentialRetries + 1`,
    /// then `fixed` before every later retry. With `initial: .seconds(1), exponentialRetries: 2,
    /// fixed: .seconds(1)`: 1 s, 2 s, 4 s, then 1 s for ever.
    ///
    /// - Parameters:
    ///   - initial: The first delay; a negative value is 0.
    ///   - scaleRate: The growth factor; a value below 1 acts as 1.
    ///   - exponentialRetries: How many retries after the first still grow; a negative value is 0.
    ///   - fixed: The delay after the exponential phase; a negative value is 0.
    public static func exponentialThenFixed(
        initial: Duration = defaultInitialDelay,
        scaleRate: Double = defaultScaleRate,
        exponentialRetries: Int = 0,
        fixed: Duration = defaultInitialDelay
    ) -> IntervalProxy {
        IntervalProxy(
            growth: .exponentialThenFixed(
                initial: initial, scaleRate: scaleRate, exponentialRetries: exponentialRetries, fixed: fixed
            )
        )
    }

    /// A fixed delay for a number of retries, then exponential backoff.
    ///
    /// The delays are `first` before the first retry, `fixed` before each of the next
    /// `fixedRetries`, then growth by `scaleRate` from the last of those. With `first:
    /// .seconds(1), fixed: .seconds(1), fixedRetries: 2, scaleRate: 2`: 1 s, 1 s, 1 s, 2 s, 4 s, …
    ///
    /// - Parameters:
    ///   - first: The first delay; a negative value is 0.
    ///   - fixed: The delay of the fixed phase; a negative value is 0.
    ///   - fixedRetries: How many retries after the first use the fixed delay; a negative value is 0.
    ///   - scaleRate: The growth factor of the exponential phase; a value below 1 acts as 1.
    public static func fixedThenExponential(
        first: Duration = defaultInitialDelay,
        fixed: Duration = defaultInitialDelay,
        fixedRetries: Int = 0,
        scaleRate: Double = defaultScaleRate
    ) -> IntervalProxy {
        IntervalProxy(
            growth: .fixedThenExponential(first: first, fixed: fixed, fixedRetries: fixedRetries, scaleRate: scaleRate)
        )
    }

    /// This proxy with its delays capped at `maximumDelay`; a negative value is 0.
    public func capped(at maximumDelay: Duration) -> IntervalProxy {
        IntervalProxy(growth: growth, maximumDelay: maximumDelay, jitter: jitter)
    }

    /// This proxy with the given jitter.
    public func jittered(_ jitter: Jitter) -> IntervalProxy {
        IntervalProxy(growth: growth, maximumDelay: maximumDelay, jitter: jitter)
    }

    /// The delay before retry number `retry` (1-based) without jitter, after the cap.
    ///
    /// - Parameter retry: The 1-based retry number; values below 1 are treated as 1.
    public func baseDelay(forRetry retry: Int) -> Duration {
        Duration(timeInterval: baseSeconds(forRetry: retry))
    }

    /// The delay before retry number `retry` (1-based), with jitter and the cap applied.
    ///
    /// - Parameters:
    ///   - retry: The 1-based retry number.
    ///   - previous: The delay returned for the previous retry; used by decorrelated jitter.
    ///   - generator: The random source for jitter.
    public func delay(
        forRetry retry: Int,
        previous: Duration? = nil,
        using generator: inout some RandomNumberGenerator
    ) -> Duration {
        Duration(timeInterval: seconds(forRetry: retry, previous: previous?.timeInterval, using: &generator))
    }

    /// ``delay(forRetry:previous:using:)`` with the system random generator.
    public func delay(forRetry retry: Int, previous: Duration? = nil) -> Duration {
        var generator = SystemRandomNumberGenerator()
        return delay(forRetry: retry, previous: previous, using: &generator)
    }

    /// The cap in seconds, or `nil` for none.
    var maximumSeconds: TimeInterval? { maximumDelay?.timeInterval }

    /// ``baseDelay(forRetry:)`` in seconds: the growth arithmetic is in `Double`, saturating at
    /// `.greatestFiniteMagnitude`.
    func baseSeconds(forRetry retry: Int) -> TimeInterval {
        let raw: TimeInterval
        switch growth {
        case .fixed(let interval):
            raw = interval.timeInterval
        case .exponential(let initial, let scaleRate):
            raw = Self.grow(initial.timeInterval, by: scaleRate, times: retry - 1)
        case .exponentialThenFixed(let initial, let scaleRate, let exponentialRetries, let fixed):
            raw = retry <= exponentialRetries + 1
                ? Self.grow(initial.timeInterval, by: scaleRate, times: retry - 1) : fixed.timeInterval
        case .fixedThenExponential(let first, let fixed, let fixedRetries, let scaleRate):
            if retry <= 1 {
                raw = first.timeInterval
            } else if retry <= fixedRetries + 1 {
                raw = fixed.timeInterval
            } else {
                let from = fixedRetries > 0 ? fixed : first
                raw = Self.grow(from.timeInterval, by: scaleRate, times: retry - 1 - fixedRetries)
            }
        }
        return min(raw, maximumSeconds ?? .greatestFiniteMagnitude)
    }

    /// ``delay(forRetry:previous:using:)`` in seconds.
    func seconds(
        forRetry retry: Int,
        previous: TimeInterval?,
        using generator: inout some RandomNumberGenerator
    ) -> TimeInterval {
        let base = baseSeconds(forRetry: retry)
        let cap = maximumSeconds ?? .greatestFiniteMagnitude
        switch jitter {
        case .none:
            return base
        case .full:
            return base > 0 ? TimeInterval.random(in: 0...base, using: &generator) : 0
        case .decorrelated:
            let floor = baseSeconds(forRetry: 1)
            let upper = min(cap, max(floor, (previous ?? floor) * 3))
            return upper > floor ? TimeInterval.random(in: floor...upper, using: &generator) : floor
        }
    }

    /// `value * scaleRate^times` (`times` below 0 counts as 0), saturating at the largest finite
    /// interval instead of overflowing to infinity.
    private static func grow(_ value: TimeInterval, by scaleRate: Double, times: Int) -> TimeInterval {
        let exponent = Double(min(max(times, 0), 1024))
        let grown = value * Foundation.pow(scaleRate, exponent)
        return grown.isFinite ? grown : .greatestFiniteMagnitude
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
