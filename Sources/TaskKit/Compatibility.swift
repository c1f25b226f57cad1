import Dispatch
import Foundation
import Logging

// The original libraries' names where TaskKit's own differ, as thin overloads and aliases so that
// a port is mostly an import change: Monstra's (its seconds-based `TimeInterval` spellings of what
// TaskKit takes as a `Duration`), SwiftCoroutine's (`canceled`, where Swift writes `isCancelled`)
// and the published TaskStore package's; Tasker's `TaskManager.shared` is in TaskManager. Each is deprecated, renamed to the Swift-first name to use instead, so the
// compiler's warning and fix-it lead a port to it; the migration articles in TaskKit.docc list
// them. A `TimeInterval` here is a number of seconds; NaN and a positive infinity have no nearest
// duration and stop the program with a message naming the parameter. MonoTask's seconds-based
// initialisers, which share their labels with initialisers taking a `Duration?`, are
// `@_disfavoredOverload`, the one underscored attribute in the package: otherwise `.zero`, which
// both `Double` and `Duration` have, picks the `Double` overload (an exact match beats an optional
// `Duration?`), so a call written in the primary spelling gets the deprecation warning, and no
// other spelling of the overload keeps `resultExpireDuration: .infinity` (a generic `some
// BinaryFloatingPoint` loses `.infinity`).

extension RetryCount {
    /// Monstra's nested name for ``IntervalProxy``: `RetryCount.IntervalProxy.exponentialBackoff(…)`
    /// and ``IntervalProxy`` are the same type.
    @available(*, deprecated, renamed: "TaskKit.IntervalProxy")
    public typealias IntervalProxy = TaskKit.IntervalProxy
}

extension IntervalProxy {
    /// Monstra's name for ``defaultInitialDelay``, in seconds (1).
    @available(*, deprecated, renamed: "defaultInitialDelay", message: "a Duration")
    public static var DefaultInitialTimeInterval: TimeInterval { defaultInitialDelay.timeInterval }

    /// Monstra's name for ``defaultScaleRate`` (2).
    @available(*, deprecated, renamed: "defaultScaleRate")
    public static var DefaultExponentialBackoffScaleRate: Double { defaultScaleRate }

    /// Monstra's spelling of ``fixed(_:)``: the delay in seconds (default 0; a negative value is 0).
    @available(*, deprecated, renamed: "fixed(_:)", message: "pass the delay as a Duration: .fixed(.seconds(1))")
    public static func fixed(timeInterval: TimeInterval = 0) -> IntervalProxy {
        .fixed(delay(timeInterval, "timeInterval"))
    }

    /// Monstra's spelling of ``exponential(initial:scaleRate:maximumDelay:jitter:)``, with the
    /// delay in seconds and Monstra's parameters only: a cap and jitter are on the `Duration`
    /// spelling (or `capped(at:)` and ``jittered(_:)``).
    ///
    /// - Parameters:
    ///   - initialTimeInterval: The delay before the first retry, in seconds; a negative value is 0.
    ///   - scaleRate: The growth factor; a value below 1 acts as 1.
    @available(*, deprecated, renamed: "exponential(initial:scaleRate:maximumDelay:jitter:)", message: "pass the delay as a Duration")
    public static func exponentialBackoff(
        initialTimeInterval: TimeInterval = DefaultInitialTimeInterval,
        scaleRate: Double = defaultScaleRate
    ) -> IntervalProxy {
        .exponential(initial: delay(initialTimeInterval, "initialTimeInterval"), scaleRate: scaleRate)
    }

    /// Monstra's spelling of ``exponentialThenFixed(initial:scaleRate:exponentialRetries:fixed:)``:
    /// `initialTimeInterval` is `initial`, `originalInitialInterval` is `fixed` and
    /// `maxExponentialBackoffCount` is `exponentialRetries`, the delays in seconds.
    ///
    /// - Parameters:
    ///   - initialTimeInterval: The first delay, in seconds; a negative value is 0.
    ///   - originalInitialInterval: The fixed delay after the exponential phase; a negative value is 0.
    ///   - maxExponentialBackoffCount: How many retries after the first still grow; a negative value is 0.
    ///   - scaleRate: The growth factor; a value below 1 acts as 1.
    @available(*, deprecated, renamed: "exponentialThenFixed(initial:scaleRate:exponentialRetries:fixed:)", message: "pass the delays as Durations")
    public static func exponentialBackoffBeforeFixed(
        initialTimeInterval: TimeInterval = DefaultInitialTimeInterval,
        originalInitialInterval: TimeInterval = DefaultInitialTimeInterval,
        maxExponentialBackoffCount: Int = 0,
        scaleRate: Double = defaultScaleRate
    ) -> IntervalProxy {
        .exponentialThenFixed(
            initial: delay(initialTimeInterval, "initialTimeInterval"),
            scaleRate: scaleRate,
            exponentialRetries: maxExponentialBackoffCount,
            fixed: delay(originalInitialInterval, "originalInitialInterval")
        )
    }

    /// Monstra's spelling of ``fixedThenExponential(first:fixed:fixedRetries:scaleRate:)``:
    /// `initialTimeInterval` is `first`, `originalInitialInterval` is `fixed` and `maxFixedCount`
    /// is `fixedRetries`, the delays in seconds.
    ///
    /// - Parameters:
    ///   - initialTimeInterval: The first delay, in seconds; a negative value is 0.
    ///   - originalInitialInterval: The delay of the fixed phase; a negative value is 0.
    ///   - maxFixedCount: How many retries after the first use the fixed delay; a negative value is 0.
    ///   - scaleRate: The growth factor of the exponential phase; a value below 1 acts as 1.
    @available(*, deprecated, renamed: "fixedThenExponential(first:fixed:fixedRetries:scaleRate:)", message: "pass the delays as Durations")
    public static func exponentialBackoffAfterFixed(
        initialTimeInterval: TimeInterval = DefaultInitialTimeInterval,
        originalInitialInterval: TimeInterval = DefaultInitialTimeInterval,
        maxFixedCount: Int = 0,
        scaleRate: Double = defaultScaleRate
    ) -> IntervalProxy {
        .fixedThenExponential(
            first: delay(initialTimeInterval, "initialTimeInterval"),
            fixed: delay(originalInitialInterval, "originalInitialInterval"),
            fixedRetries: maxFixedCount,
            scaleRate: scaleRate
        )
    }

    /// `seconds` as a delay (a negative value is `.zero`); NaN and a positive infinity trap.
    private static func delay(_ seconds: TimeInterval, _ parameter: String) -> Duration {
        precondition(
            !seconds.isNaN && seconds != .infinity,
            "IntervalProxy: \(parameter) must be a finite number of seconds, got \(seconds)"
        )
        return Duration(timeInterval: seconds)
    }
}

extension MonoTask {
    /// Monstra's callback initialiser: `resultExpireDuration` in seconds, `.infinity` for a value
    /// cached until cleared; a negative or NaN value stops the program with a message naming it.
    /// It takes Monstra's parameters only: refresh-ahead, a clock, a logger, metrics and tracing
    /// are on the `Duration?` initialiser it is renamed to.
    @_disfavoredOverload
    @available(
        *, deprecated, renamed: "init(retry:resultExpireDuration:refreshAhead:expiryJitter:failSafe:taskQueue:callbackQueue:clock:logger:metricsLabel:tracing:expiry:failureExpiry:task:)",
        message: "pass resultExpireDuration as a Duration? (nil: cached until cleared)"
    )
    public convenience init(
        retry: RetryCount = .never,
        resultExpireDuration: TimeInterval,
        taskQueue: DispatchQueue = .global(),
        callbackQueue: DispatchQueue = .global(),
        task: @escaping CallbackExecution
    ) {
        self.init(
            retry: retry, resultExpireDuration: Self.timeToLive(seconds: resultExpireDuration),
            callbackQueue: callbackQueue, body: .callback(task, taskQueue)
        )
    }

    /// Monstra's async initialiser: `resultExpireDuration` in seconds, validated as by the
    /// callback form, and Monstra's parameters only. `taskQueue` is accepted and not used: an
    /// async block runs in a Swift task.
    @_disfavoredOverload
    @available(
        *, deprecated, renamed: "init(retry:resultExpireDuration:refreshAhead:expiryJitter:failSafe:callbackQueue:clock:logger:metricsLabel:tracing:expiry:failureExpiry:task:)",
        message: "pass resultExpireDuration as a Duration? (nil: cached until cleared); an async block takes no taskQueue"
    )
    public convenience init(
        retry: RetryCount = .never,
        resultExpireDuration: TimeInterval,
        taskQueue: DispatchQueue = .global(),
        callbackQueue: DispatchQueue = .global(),
        task: @escaping AsyncExecution
    ) {
        self.init(
            retry: retry, resultExpireDuration: Self.timeToLive(seconds: resultExpireDuration),
            callbackQueue: callbackQueue, body: .async(task)
        )
    }

    /// Monstra's spelling of ``clearResult(ongoingExecutionStrategy:restartWhenIdle:)``:
    /// `shouldRestartWhenIDLE` is `restartWhenIdle`.
    @available(*, deprecated, renamed: "clearResult(ongoingExecutionStrategy:restartWhenIdle:)")
    public func clearResult(
        ongoingExecutionStrategy: OngoingExecutionStrategy = .allowCompletion,
        shouldRestartWhenIDLE: Bool
    ) {
        clearResult(ongoingExecutionStrategy: ongoingExecutionStrategy, restartWhenIdle: shouldRestartWhenIDLE)
    }

    /// The initialiser Monstra's spellings forward to: the primary one's defaults for every
    /// option Monstra did not have.
    private convenience init(retry: RetryCount, resultExpireDuration: Duration?, callbackQueue: DispatchQueue, body: Body) {
        self.init(
            retry: retry, resultExpireDuration: resultExpireDuration, refreshAhead: nil, callbackQueue: callbackQueue,
            clock: ContinuousClock(), logger: .silent(label: "TaskKit.MonoTask"), metricsLabel: nil, tracing: .none,
            body: body
        )
    }

    /// Monstra's `resultExpireDuration` in seconds as a time to live: `.infinity` is `nil` (cached
    /// until cleared); a negative or NaN value traps naming the parameter.
    private static func timeToLive(seconds resultExpireDuration: TimeInterval) -> Duration? {
        precondition(
            resultExpireDuration >= 0,  // false for NaN
            "MonoTask: resultExpireDuration must be >= 0 seconds (or .infinity), got \(resultExpireDuration)"
        )
        return resultExpireDuration.isInfinite ? nil : Duration(timeInterval: resultExpireDuration)
    }
}

extension TaskStoreDuplicateKeyBehavior {
    /// The published TaskStore package's name for ``prefersPrevious``.
    @available(*, deprecated, renamed: "prefersPrevious")
    public var preferPrevious: Bool { prefersPrevious }

    /// The published TaskStore package's name for ``cancelsPrevious``.
    @available(*, deprecated, renamed: "cancelsPrevious")
    public var cancelPrevious: Bool { cancelsPrevious }

    /// The published TaskStore package's name for ``waitsForPrevious``.
    @available(*, deprecated, renamed: "waitsForPrevious")
    public var waitForPrevious: Bool { waitsForPrevious }

    /// The published TaskStore package's name for ``runsNewTask``.
    @available(*, deprecated, renamed: "runsNewTask")
    public var runNewTask: Bool { runsNewTask }
}

extension TaskStore {
    /// The published TaskStore package's name for ``runningKeys``.
    @available(*, deprecated, renamed: "runningKeys")
    public var runningTaskKeys: Set<Key> { runningKeys }
}

extension CoFuture {
    /// SwiftCoroutine's spelling of ``isCancelled``.
    @available(*, deprecated, renamed: "isCancelled")
    public final var isCanceled: Bool { isCancelled }

    /// SwiftCoroutine's spelling of ``whenCancelled(_:)``.
    @available(*, deprecated, renamed: "whenCancelled(_:)")
    public final func whenCanceled(_ callback: @escaping @Sendable () -> Void) {
        whenCancelled(callback)
    }
}

extension CoFutureError {
    /// SwiftCoroutine's spelling of ``cancelled``: compares equal to it, and matches it in a
    /// `case .canceled:` pattern.
    @available(*, deprecated, renamed: "cancelled")
    public static var canceled: CoFutureError { .cancelled }
}
