/// The clock of a ``MonoTask`` with its type erased, measuring time as offsets from the moment
/// the task was created (so the state machine works with plain `Duration`s).
@usableFromInline
protocol MonoTaskTimeSource: Sendable {
    /// Time elapsed since the origin.
    func now() -> Duration
    /// Time elapsed since the origin, in whole nanoseconds (``KeyedMonoTask``'s unit).
    func nowNanoseconds() -> Int64
    /// Sleeps for `duration`; throws `CancellationError` when the calling task is cancelled.
    func sleep(for duration: Duration) async throws
}

struct ClockTimeSource<C: Clock<Duration>>: MonoTaskTimeSource {
    let clock: C
    let origin: C.Instant

    init(_ clock: C) {
        self.clock = clock
        self.origin = clock.now
    }

    func now() -> Duration {
        origin.duration(to: clock.now)
    }

    func nowNanoseconds() -> Int64 {
        now().keyedMonoTaskNanoseconds
    }

    func sleep(for duration: Duration) async throws {
        try await clock.sleep(until: clock.now.advanced(by: duration), tolerance: nil)
    }
}

/// ``ClockTimeSource`` for `ContinuousClock`, without the generic `Clock` and `InstantProtocol`
/// witness calls a `ClockTimeSource<C>` made in unspecialised code goes through on every read.
struct ContinuousClockTimeSource: MonoTaskTimeSource {
    let origin = ContinuousClock.now

    func now() -> Duration {
        ContinuousClock.now - origin
    }

    func nowNanoseconds() -> Int64 {
        now().keyedMonoTaskNanoseconds
    }

    func sleep(for duration: Duration) async throws {
        try await ContinuousClock().sleep(until: .now.advanced(by: duration), tolerance: nil)
    }
}

/// The time source of `clock`: the platform's coarse reading for a ``CoarseContinuousClock``
/// (``makeCoarseContinuousTimeSource()``), a precise one without generic calls for a
/// `ContinuousClock`, the clock itself otherwise.
func makeTimeSource(_ clock: some Clock<Duration>) -> any MonoTaskTimeSource {
    if clock is CoarseContinuousClock { return makeCoarseContinuousTimeSource() }
    if clock is ContinuousClock { return ContinuousClockTimeSource() }
    return ClockTimeSource(clock)
}
