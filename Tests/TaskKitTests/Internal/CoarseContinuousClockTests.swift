import Testing
@testable import TaskKit
import TaskKitTestSupport

/// ``CoarseContinuousClock`` against `ContinuousClock`, and which reading each clock argument gets.
@Suite(.scaledTimeLimit(minutes: 1))
struct CoarseContinuousClockTests {
    @Test func readsContinuousClocksTimeToWithinItsResolution() async throws {
        let coarse = CoarseContinuousClock()
        let precise = ContinuousClock()
        let resolution = coarse.minimumResolution
        #expect(resolution > .zero && resolution <= .milliseconds(100))
        var previous = coarse.now
        for _ in 0..<20 {
            let before = precise.now
            let reading = coarse.now
            let after = precise.now
            // A coarse reading is the time of the last tick the kernel handled: never ahead,
            // less than a tick behind, or up to two when a tick was handled late (measured here
            // under AddressSanitizer: 1.3 ticks), plus the boot-time offset's measurement noise.
            #expect(reading >= before - resolution * 2 - .milliseconds(1), "\(before) \(reading)")
            #expect(reading <= after + .milliseconds(1), "\(reading) \(after)")
            #expect(reading >= previous)
            previous = reading
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test func sleepsAsContinuousClockDoes() async throws {
        let coarse = CoarseContinuousClock()
        let precise = ContinuousClock()
        let start = precise.now
        try await coarse.sleep(for: .milliseconds(30))
        #expect(start.duration(to: precise.now) >= .milliseconds(30) - coarse.minimumResolution)
    }

    /// A `ContinuousClock` argument is read as `ContinuousClock` reads itself; only the coarse
    /// clock gets the coarse reading.
    @Test func aContinuousClockArgumentMeansContinuousClock() {
        #expect(makeTimeSource(ContinuousClock()) is ContinuousClockTimeSource)
        #expect(type(of: makeTimeSource(CoarseContinuousClock())) == type(of: makeCoarseContinuousTimeSource()))
        #expect(makeTimeSource(SuspendingClock()) is ClockTimeSource<SuspendingClock>)
    }
}
