/// `ContinuousClock`'s time, read cheaply: on Linux at the kernel's tick, elsewhere exactly.
///
/// Its instants are `ContinuousClock` instants (the time goes on while the system sleeps), and it
/// sleeps as `ContinuousClock` does. What differs is the reading of ``now``:
///
/// - **Linux**: the time of the last kernel tick, from `CLOCK_MONOTONIC_COARSE` plus the offset of
///   the boot-time clock, never ahead of `ContinuousClock.now` and normally less than one tick
///   behind it; a tick that the kernel handles late (on a busy or virtual machine) can add up to
///   another. The resolution,
///   ``minimumResolution``, is one tick: what `clock_getres(CLOCK_MONOTONIC_COARSE)` reports,
///   1 to 10 milliseconds depending on the kernel's configuration (4 ms with the common
///   `HZ=250`). A read costs a few nanoseconds, against about 45 for a precise one.
/// - **Elsewhere**: `ContinuousClock.now` itself, which is already cheap.
///
/// It is ``KeyedMonoTask``'s default clock, where a precise read would cost as much as the rest
/// of a cache hit; an expiry is then exact to within a tick or two. Pass `ContinuousClock()` instead
/// where durations below a few milliseconds must be exact.
///
/// ```swift
/// let clock = CoarseContinuousClock()
/// let start = clock.now
/// try await clock.sleep(for: .milliseconds(50))
/// print(start.duration(to: clock.now))  // 50 ms, give or take one tick
/// ```
public struct CoarseContinuousClock: Clock, Sendable {
    /// A `ContinuousClock` instant.
    public typealias Instant = ContinuousClock.Instant

    /// Creates the clock. Every instance reads the same time.
    public init() {}

    /// The current instant: on Linux the time of the last kernel tick, elsewhere
    /// `ContinuousClock.now`.
    public var now: ContinuousClock.Instant { coarseContinuousNow() }

    /// The smallest difference between two readings: on Linux one kernel tick, elsewhere
    /// `ContinuousClock`'s resolution.
    public var minimumResolution: Duration { coarseContinuousResolution() }

    /// Sleeps until `deadline`, as `ContinuousClock` does.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled.
    public func sleep(until deadline: ContinuousClock.Instant, tolerance: Duration? = nil) async throws {
        try await ContinuousClock().sleep(until: deadline, tolerance: tolerance)
    }
}
