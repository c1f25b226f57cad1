/// Fail-safe: when a cached value has expired and its reload fails, the callers get the expired
/// value instead of the error.
///
/// A cache in front of a backend that fails for a minute otherwise turns every expiry into an
/// error for its callers. With a fail-safe, ``MonoTask`` and ``KeyedMonoTask`` answer the
/// callers of a failed reload with the value that expired, as long as it expired at most
/// ``maximumStaleness`` ago, and serve it as fresh for ``throttle``: the loader is not called
/// again for that value meanwhile, so a failing backend is not hammered. When the throttle ends,
/// the next caller (or, with stale-while-revalidate, a background refresh) loads again; a
/// success ends the fail-safe, another failure serves the value for one more throttle, until it
/// is older than ``maximumStaleness`` past its expiry, when the callers get the error.
///
/// The failure is not hidden: it is counted in the counters' `failures` (and the
/// `taskkit_monotask_failures` metric), the callers it was answered for in `failSafeHits` (and
/// the `taskkit_monotask_requests` outcome `fail_safe`), and it is logged at `warning`. A
/// `CancellationError` is never answered this way, and with no expired value at hand (a first
/// load, a value older than the bound, one evicted or invalidated) the callers get the error as
/// without a fail-safe.
///
/// With a ``softTimeout``, a slow reload does not hold callers hostage either: a caller that
/// finds an expired value within the bound and has to wait for its reload waits at most that
/// long, then gets the expired value (counted as `softTimeouts`), while the load goes on and
/// updates the entry when it ends.
///
/// ```swift
/// let prices = KeyedMonoTask<String, Price>(
///     maximumEntries: 10_000,
///     resultExpireDuration: .seconds(60),
///     failSafe: FailSafe(maximumStaleness: .seconds(3_600), throttle: .seconds(30))
/// ) { symbol in
///     try await pricing.quote(for: symbol)
/// }
/// ```
public struct FailSafe: Sendable, Hashable {
    /// How long past its expiry a value may still answer for a failed reload. Must be greater
    /// than zero.
    public let maximumStaleness: Duration
    /// How long an expired value that answered for a failed reload is then served as fresh,
    /// without calling the loader. Must be greater than zero. Default: 30 seconds.
    public let throttle: Duration
    /// How long a caller that finds an expired value (within ``maximumStaleness``) waits for its
    /// reload before it gets that value instead; the load goes on and stores its result. `nil`
    /// (default): callers wait for the reload. A forced call (`forceUpdate`) always waits.
    public let softTimeout: Duration?

    /// A fail-safe serving a value up to `maximumStaleness` past its expiry, reloading at most
    /// once per `throttle` while the backend fails, and, with a `softTimeout`, answering a
    /// caller with that value when its reload takes longer.
    ///
    /// - Precondition: every duration is greater than zero (the message names the parameter).
    public init(maximumStaleness: Duration, throttle: Duration = .seconds(30), softTimeout: Duration? = nil) {
        precondition(maximumStaleness > .zero, "FailSafe: maximumStaleness must be > .zero, got \(maximumStaleness)")
        precondition(throttle > .zero, "FailSafe: throttle must be > .zero, got \(throttle)")
        if let softTimeout {
            precondition(softTimeout > .zero, "FailSafe: softTimeout must be > .zero (or nil), got \(softTimeout)")
        }
        self.maximumStaleness = maximumStaleness
        self.throttle = throttle
        self.softTimeout = softTimeout
    }
}
