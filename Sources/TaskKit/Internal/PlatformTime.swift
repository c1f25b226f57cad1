#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

// The platform conditionals of reading the time cheaply live in this file.

/// The time source for a ``CoarseContinuousClock``: `ContinuousClock`'s time (it goes on while
/// the system sleeps) as an offset from the moment the source was made.
///
/// On Linux a precise read (`clock_gettime(CLOCK_BOOTTIME)`, which `ContinuousClock.now` makes)
/// costs as much as a whole ``KeyedMonoTask`` hit without it, so ``LinuxCoarseContinuousTime``
/// reads the kernel's coarse clock instead, to within one kernel tick. Elsewhere
/// `ContinuousClock.now` is cheap and is read as it is.
func makeCoarseContinuousTimeSource() -> any MonoTaskTimeSource {
    #if os(Linux)
    LinuxCoarseContinuousTime()
    #else
    ContinuousClockTimeSource()
    #endif
}

/// A time source for a hot path: the Linux coarse source read inline (no existential call, no
/// object retained), any other source through ``MonoTaskTimeSource``.
///
/// ``KeyedMonoTask`` reads the time on every hit; through the existential the read cost 58
/// instructions of a 406-instruction hit, inline it costs the `clock_gettime` call and a few
/// loads (`Benchmarks/NOTES.md`, issue 35).
@usableFromInline
struct InlineTimeSource: Sendable {
    #if os(Linux)
    /// The coarse source's origin, when the clock is a ``CoarseContinuousClock``.
    @usableFromInline let coarseOrigin: Int64?
    #endif
    /// The source, whatever the clock (the coarse one too): for sleeping and the cold paths.
    @usableFromInline let source: any MonoTaskTimeSource

    /// The time source of `clock` (``makeTimeSource(_:)``).
    init(_ clock: some Clock<Duration>) {
        let source = makeTimeSource(clock)
        #if os(Linux)
        self.coarseOrigin = (source as? LinuxCoarseContinuousTime)?.origin
        #endif
        self.source = source
    }

    /// Time elapsed since the source's origin, in whole nanoseconds.
    @inlinable @inline(__always)
    func nowNanoseconds() -> Int64 {
        #if os(Linux)
        if let coarseOrigin { return LinuxCoarseBootTime.nowNanoseconds() &- coarseOrigin }
        #endif
        return source.nowNanoseconds()
    }

    /// Sleeps for `duration` on the source's clock; throws `CancellationError` when the calling
    /// task is cancelled.
    @usableFromInline
    func sleep(for duration: Duration) async throws {
        try await source.sleep(for: duration)
    }
}

/// ``CoarseContinuousClock/now``: on Linux `ContinuousClock`'s time at the last kernel tick,
/// elsewhere `ContinuousClock.now`.
func coarseContinuousNow() -> ContinuousClock.Instant {
    #if os(Linux)
    LinuxCoarseInstants.shared.now()
    #else
    ContinuousClock.now
    #endif
}

/// ``CoarseContinuousClock/minimumResolution``: on Linux one kernel tick (what
/// `clock_getres(CLOCK_MONOTONIC_COARSE)` reports), elsewhere `ContinuousClock`'s resolution.
func coarseContinuousResolution() -> Duration {
    #if os(Linux)
    var resolution = timespec()
    // Cannot fail: every Linux kernel TaskKit runs on has the coarse clock.
    clock_getres(CLOCK_MONOTONIC_COARSE, &resolution)
    return .seconds(resolution.tv_sec) + .nanoseconds(resolution.tv_nsec)
    #else
    ContinuousClock().minimumResolution
    #endif
}

#if os(Linux)
/// The instants of ``CoarseContinuousClock`` on Linux: one process-wide coarse time source, whose
/// offsets count from the `ContinuousClock` instant of its origin.
///
/// `ContinuousClock` reads `CLOCK_BOOTTIME` on Linux, so the instant of the source's origin (a
/// boot time read at the last tick) is a precise `ContinuousClock.now` moved back by the precise
/// boot time's lead over it, read next to it. A coarse instant is therefore never ahead of
/// `ContinuousClock.now`, and normally less than one tick behind it (up to two when the kernel
/// handles a tick late).
struct LinuxCoarseInstants: Sendable {
    static let shared = LinuxCoarseInstants()

    private let time: LinuxCoarseContinuousTime
    private let origin: ContinuousClock.Instant

    init() {
        let time = LinuxCoarseContinuousTime()
        let boot = LinuxCoarseBootTime.read(CLOCK_BOOTTIME)
        let precise = ContinuousClock.now
        self.time = time
        self.origin = precise.advanced(by: .nanoseconds(time.origin &- boot))
    }

    func now() -> ContinuousClock.Instant {
        origin.advanced(by: time.now())
    }
}

/// `ContinuousClock`'s time, read from `CLOCK_MONOTONIC_COARSE` (the time of the last kernel
/// tick: a few nanoseconds per read, a resolution of one tick, `clock_getres` says how long)
/// plus the offset of the boot-time clock from the monotonic one, as an offset from the moment
/// the source was made.
@usableFromInline
final class LinuxCoarseContinuousTime: MonoTaskTimeSource {
    /// The boot time, in nanoseconds, at creation (``LinuxCoarseBootTime/nowNanoseconds()``).
    @usableFromInline let origin: Int64

    init() {
        LinuxCoarseBootTime.prepare()
        origin = LinuxCoarseBootTime.nowNanoseconds()
    }

    @usableFromInline
    func now() -> Duration {
        .nanoseconds(nowNanoseconds())
    }

    @usableFromInline
    func nowNanoseconds() -> Int64 {
        LinuxCoarseBootTime.nowNanoseconds() &- origin
    }

    @usableFromInline
    func sleep(for duration: Duration) async throws {
        try await ContinuousClock().sleep(until: .now.advanced(by: duration), tolerance: nil)
    }
}

/// The boot time (`CLOCK_BOOTTIME`, `ContinuousClock`'s clock) at the last kernel tick: the
/// coarse monotonic clock plus the boot clock's lead over the monotonic one, process-wide.
///
/// `CLOCK_MONOTONIC_COARSE` stops while the system is suspended and `CLOCK_BOOTTIME` does not;
/// their difference grows by the time spent suspended. The offset is measured again when a
/// second of coarse time has passed since it was last measured, so after a suspension the time
/// catches up within a second. Reads are monotonic except across such a catch-up's measurement
/// noise (well under a microsecond), which only ever moves an expiry by that much.
///
/// Process-wide state in atomics, no lock and no object: a hot path reads it inline without
/// retaining anything. A read that sees the new `measuredAt` with the old `offset` (or the
/// reverse) returns a time off by at most one measurement's noise.
@usableFromInline
enum LinuxCoarseBootTime {
    /// `CLOCK_BOOTTIME` minus `CLOCK_MONOTONIC`, in nanoseconds, when last measured. Both
    /// atomics start at zero, constants the compiler lays out statically: no lazy initialisation
    /// to check on each read. ``prepare()`` makes the first measurement before any read.
    @usableFromInline static let offset = Atomic<Int64>(0)
    /// The coarse time, in nanoseconds, when `offset` was last measured.
    @usableFromInline static let measuredAt = Atomic<Int64>(0)

    /// How much coarse time passes before the offset is measured again.
    @inlinable static var remeasureInterval: Int64 { 1_000_000_000 }

    /// The boot time at the last tick, in nanoseconds.
    ///
    /// Not inlinable: called from another module, each of the atomics (and the clock read) is a
    /// call of its own; out of line, the three are one call (14 instructions fewer per hit).
    @usableFromInline
    static func nowNanoseconds() -> Int64 {
        let coarse = readCoarse()
        if coarse &- measuredAt.load(ordering: .relaxed) >= remeasureInterval { remeasure(at: coarse) }
        return coarse &+ offset.load(ordering: .relaxed)
    }

    /// Measures the offset the first time it is called, once in the process (callers meanwhile
    /// wait): every source calls it before its first read.
    static func prepare() {
        _ = firstMeasurement
    }

    private static let firstMeasurement: Void = remeasure(at: readCoarse(), first: true)

    /// A second of coarse time has passed since the offset was measured: measures it again.
    @usableFromInline
    static func remeasure(at coarse: Int64) {
        remeasure(at: coarse, first: false)
    }

    private static func remeasure(at coarse: Int64, first: Bool) {
        measuredAt.store(coarse, ordering: .relaxed)
        var measured = measureOffset()
        // The first measurement is not skipped: eight held-up ones in a row, then a plain one,
        // off by the hold-up at most. A later one waits for the next second instead.
        if first {
            for _ in 0..<8 where measured == nil { measured = measureOffset() }
            measured = measured ?? (read(CLOCK_BOOTTIME) &- read(CLOCK_MONOTONIC))
        }
        if let measured { offset.store(measured, ordering: .relaxed) }
    }

    /// `CLOCK_BOOTTIME` minus `CLOCK_MONOTONIC`, or `nil` when the thread was held up between the
    /// reads long enough to spoil the difference (then it is measured at the next chance).
    private static func measureOffset() -> Int64? {
        let before = read(CLOCK_MONOTONIC)
        let boot = read(CLOCK_BOOTTIME)
        let after = read(CLOCK_MONOTONIC)
        guard after &- before < 20_000 else { return nil }
        return boot &- (before &+ (after &- before) / 2)
    }

    /// The coarse clock's time, in nanoseconds. Not inlinable: `timespec` cannot be named in
    /// inlinable code (it comes from a module this file does not import).
    @usableFromInline
    static func readCoarse() -> Int64 {
        read(CLOCK_MONOTONIC_COARSE)
    }

    fileprivate static func read(_ clock: clockid_t) -> Int64 {
        var time = timespec()
        // Cannot fail: the clocks are ones every Linux kernel TaskKit runs on provides, and
        // `time` is a valid address.
        clock_gettime(clock, &time)
        return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
    }
}
#endif
