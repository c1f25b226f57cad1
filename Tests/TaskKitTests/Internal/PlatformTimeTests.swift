#if os(Linux)
import Glibc
import Testing
@testable import TaskKit
import TaskKitTestSupport

/// ``LinuxCoarseContinuousTime`` against `ContinuousClock` read precisely.
@Suite(.scaledTimeLimit(minutes: 1))
struct PlatformTimeTests {
    /// One kernel tick: the resolution of `CLOCK_MONOTONIC_COARSE`.
    static let tick: Duration = {
        var resolution = timespec()
        clock_getres(CLOCK_MONOTONIC_COARSE, &resolution)
        return .seconds(resolution.tv_sec) + .nanoseconds(resolution.tv_nsec)
    }()

    @Test func startsAtZeroAndNeverGoesBackwards() {
        let time = LinuxCoarseContinuousTime()
        var previous = time.now()
        #expect(previous >= .zero && previous <= Self.tick)
        for _ in 0..<200_000 {
            let now = time.now()
            #expect(now >= previous)
            previous = now
        }
    }

    /// Over a span that crosses the one-second re-measurement of the offset, the coarse time
    /// moves as `ContinuousClock` does, to within two ticks at each end.
    @Test func followsContinuousClockToWithinATick() async throws {
        let clock = ContinuousClock()
        let time = LinuxCoarseContinuousTime()
        let start = clock.now
        let coarseStart = time.now()
        for _ in 0..<12 {
            try await Task.sleep(for: .milliseconds(100))
            let precise = start.duration(to: clock.now)
            let coarse = time.now() - coarseStart
            // A coarse read is the time of the last tick the kernel handled: less than a tick
            // behind, or up to two when a tick was handled late (measured under
            // AddressSanitizer on this 2-core VM: 1.3 ticks); both ends of the span are (plus the
            // offset's measurement noise, well under a millisecond).
            #expect(coarse <= precise + Self.tick * 2 + .milliseconds(1), "coarse \(coarse), precise \(precise)")
            #expect(coarse >= precise - Self.tick * 2 - .milliseconds(1), "coarse \(coarse), precise \(precise)")
        }
    }

    /// On Linux the coarse clock's resolution is one kernel tick, and its time source is the
    /// coarse reading.
    @Test func theCoarseClockReadsAtTheKernelsTick() {
        #expect(CoarseContinuousClock().minimumResolution == Self.tick)
        #expect(makeTimeSource(CoarseContinuousClock()) is LinuxCoarseContinuousTime)
    }

    /// The inline reading a `KeyedMonoTask` hit makes is the coarse source's: same origin, same
    /// ticks; any other clock is read through its source.
    @Test func theInlineReadingIsTheCoarseSourcesReading() {
        let inline = InlineTimeSource(CoarseContinuousClock())
        #expect(inline.coarseOrigin != nil)
        let before = inline.source.nowNanoseconds()
        let read = inline.nowNanoseconds()
        let after = inline.source.nowNanoseconds()
        #expect(before <= read && read <= after)
        #expect(read >= 0 && read <= Int64(Self.tick.components.attoseconds / 1_000_000_000) * 2 + 1_000_000)
        #expect(InlineTimeSource(ContinuousClock()).coarseOrigin == nil)
    }

    /// A `KeyedMonoTask` on the default clock keeps a value for its time to live and loads again
    /// after it. (On a loaded machine the first two calls may already be a time to live apart:
    /// then the second one loads too, and only the load after the sleep is checked.)
    @Test func keyedMonoTaskOnTheDefaultClockExpiresAfterItsTimeToLive() async throws {
        let loads = LockedState(0)
        let cache = KeyedMonoTask<Int, Int>(maximumEntries: 4, resultExpireDuration: .milliseconds(200)) { key in
            loads.withLock { $0 += 1 }
            return key
        }
        let clock = ContinuousClock()
        _ = try await cache.value(for: 1)
        let loaded = clock.now
        _ = try await cache.value(for: 1)
        if loaded.duration(to: clock.now) < .milliseconds(150) {
            #expect(loads.withLock { $0 } == 1)
        }
        try await Task.sleep(for: .milliseconds(200) + Self.tick + .milliseconds(5))
        let before = loads.withLock { $0 }
        _ = try await cache.value(for: 1)
        #expect(loads.withLock { $0 } == before + 1)
    }
}
#endif
