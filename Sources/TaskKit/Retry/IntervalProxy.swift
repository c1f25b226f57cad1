import Foundation

/// How long to wait before each retry: a growth rule, an optional cap and optional jitter.
///
/// `IntervalProxy` is the one backoff model of TaskKit: ``MonoTask``, ``TaskManager`` and the
/// HTTP retry policy all use it through ``RetryCount``.
///
/// ```swift
/// // 1 s, 2 s, 4 s, 8 s, then 10 s for every later retry, each randomised in 0...delay.
/// let backoff = IntervalProxy
///     .exponentialBackoff(initialTimeInterval: 1, scaleRate: 2)
///     .capped(at: 10)
///     .jittered(.full)
/// ```
///
/// Invalid values (negative, NaN or infinite intervals, a scale rate below 1) are rejected with a
/// precondition failure that names the parameter and the value.
public struct IntervalProxy: Sendable, Hashable {
    /// How the base delay grows from one retry to the next.
    public enum Growth: Sendable, Hashable {
        /// The same delay before every retry.
        case fixed(TimeInterval)
        /// `initial * scaleRate^(retry - 1)` before retry number `retry` (1-based).
        case exponential(initial: TimeInterval, scaleRate: Double)
    }

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
    ///   - maximumTimeInterval: The cap in seconds, or `nil` for none. Must be finite and not negative.
    ///   - jitter: The randomisation to apply.
    public init(growth: Growth, maximumTimeInterval: TimeInterval? = nil, jitter: Jitter = .none) {
        switch growth {
        case .fixed(let interval):
            Self.checkInterval(interval, name: "timeInterval")
        case .exponential(let initial, let scaleRate):
            Self.checkInterval(initial, name: "initialTimeInterval")
            precondition(
                scaleRate.isFinite && scaleRate >= 1,
                "IntervalProxy: scaleRate must be a finite number >= 1, got \(scaleRate)"
            )
        }
        if let maximumTimeInterval {
            Self.checkInterval(maximumTimeInterval, name: "maximumTimeInterval")
        }
        self.growth = growth
        self.maximumTimeInterval = maximumTimeInterval
        self.jitter = jitter
    }

    /// The same delay before every retry.
    ///
    /// - Parameter timeInterval: The delay in seconds; finite and not negative.
    public static func fixed(timeInterval: TimeInterval) -> IntervalProxy {
        IntervalProxy(growth: .fixed(timeInterval))
    }

    /// A delay that starts at `initialTimeInterval` and is multiplied by `scaleRate` after each retry.
    ///
    /// - Parameters:
    ///   - initialTimeInterval: The delay before the first retry, in seconds; finite and not negative.
    ///   - scaleRate: The growth factor; finite and at least 1. Defaults to 2.
    ///   - maximumTimeInterval: An optional cap in seconds.
    ///   - jitter: Optional randomisation. Defaults to none.
    public static func exponentialBackoff(
        initialTimeInterval: TimeInterval,
        scaleRate: Double = 2,
        maximumTimeInterval: TimeInterval? = nil,
        jitter: Jitter = .none
    ) -> IntervalProxy {
        IntervalProxy(
            growth: .exponential(initial: initialTimeInterval, scaleRate: scaleRate),
            maximumTimeInterval: maximumTimeInterval,
            jitter: jitter
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
            // Clamp the exponent so huge retry numbers saturate instead of overflowing to inf/NaN.
            let exponent = Double(min(max(retry, 1) - 1, 1024))
            let value = initial * Foundation.pow(scaleRate, exponent)
            raw = value.isFinite ? value : .greatestFiniteMagnitude
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

    private static func checkInterval(_ value: TimeInterval, name: String) {
        precondition(
            value.isFinite && value >= 0,
            "IntervalProxy: \(name) must be a finite number of seconds >= 0, got \(value)"
        )
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
