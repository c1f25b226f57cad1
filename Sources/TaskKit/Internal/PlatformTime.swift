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
        let boot = LinuxCoarseContinuousTime.read(CLOCK_BOOTTIME)
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
/// plus the offset of the boot-time clock from the monotonic one.
///
/// `CLOCK_MONOTONIC_COARSE` stops while the system is suspended and `CLOCK_BOOTTIME` does not;
/// their difference grows by the time spent suspended. The offset is measured again when a
/// second of coarse time has passed since it was last measured, so after a suspension the time
/// catches up within a second. Reads are monotonic except across such a catch-up's measurement
/// noise (well under a microsecond), which only ever moves an expiry by that much.
///
/// Sendable without a lock: the fields are atomics, and a read that sees the new `measuredAt`
/// with the old `offset` (or the reverse) returns a time off by at most one measurement's noise.
final class LinuxCoarseContinuousTime: MonoTaskTimeSource {
    /// The boot time, in nanoseconds, at creation (coarse time plus offset).
    fileprivate let origin: Int64
    /// `CLOCK_BOOTTIME` minus `CLOCK_MONOTONIC`, in nanoseconds, when last measured.
    private let offset: Atomic<Int64>
    /// The coarse time, in nanoseconds, when `offset` was last measured.
    private let measuredAt: Atomic<Int64>

    /// How much coarse time passes before the offset is measured again.
    private static let remeasureInterval: Int64 = 1_000_000_000

    init() {
        let coarse = Self.read(CLOCK_MONOTONIC_COARSE)
        var initialOffset = Self.measureOffset()
        for _ in 0..<8 where initialOffset == nil { initialOffset = Self.measureOffset() }
        // Eight held-up measurements in a row: take a plain one, off by the hold-up at most.
        let measured = initialOffset ?? (Self.read(CLOCK_BOOTTIME) &- Self.read(CLOCK_MONOTONIC))
        origin = coarse &+ measured
        offset = Atomic(measured)
        measuredAt = Atomic(coarse)
    }

    func now() -> Duration {
        .nanoseconds(nowNanoseconds())
    }

    func nowNanoseconds() -> Int64 {
        let coarse = Self.read(CLOCK_MONOTONIC_COARSE)
        if coarse &- measuredAt.load(ordering: .relaxed) >= Self.remeasureInterval {
            measuredAt.store(coarse, ordering: .relaxed)
            if let measured = Self.measureOffset() { offset.store(measured, ordering: .relaxed) }
        }
        return coarse &+ offset.load(ordering: .relaxed) &- origin
    }

    func sleep(for duration: Duration) async throws {
        try await ContinuousClock().sleep(until: .now.advanced(by: duration), tolerance: nil)
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

    fileprivate static func read(_ clock: clockid_t) -> Int64 {
        var time = timespec()
        // Cannot fail: the clocks are ones every Linux kernel TaskKit runs on provides, and
        // `time` is a valid address.
        clock_gettime(clock, &time)
        return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
    }
}
#endif
