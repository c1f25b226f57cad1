import Testing
import TaskKit
import TaskKitTestSupport

@Suite struct RetryCountTests {
    @Test func integerLiteralMeansRetryCount() {
        let zero: RetryCount = 0
        let three: RetryCount = 3
        #expect(zero == .never)
        #expect(three.maximumRetries == 3)
    }

    @Test func countMeansExactlyThatManyRetries() {
        var schedule = RetryCount.count(count: 2, intervalProxy: .fixed(.seconds(1))).makeSchedule()
        #expect(schedule.nextDelay() == .seconds(1))
        #expect(schedule.nextDelay() == .seconds(1))
        #expect(schedule.nextDelay() == nil)
        var none = RetryCount.count(count: 0).makeSchedule()
        #expect(none.nextDelay() == nil)
        var never = RetryCount.never.makeSchedule()
        #expect(never.nextDelay() == nil)
    }

    @available(*, deprecated, message: "exercises the seconds-based compatibility spellings")
    @Test func exponentialBackoffGrowsAndIsCapped() {
        let proxy = IntervalProxy.exponentialBackoff(initialTimeInterval: 1, scaleRate: 2).capped(at: .seconds(5))
        #expect((1...5).map { proxy.baseDelay(forRetry: $0).inSeconds } == [1, 2, 4, 5, 5])
        #expect(proxy.baseDelay(forRetry: 10_000).inSeconds == 5)
        let uncapped = IntervalProxy.exponentialBackoff(initialTimeInterval: 1)
        #expect(uncapped.baseDelay(forRetry: 100_000).inSeconds.isFinite)
    }

    @available(*, deprecated, message: "exercises the seconds-based compatibility spellings")
    @Test func jitterStaysInBounds() {
        let full = IntervalProxy.exponentialBackoff(initialTimeInterval: 1).capped(at: .seconds(8)).jittered(.full)
        let decorrelated = IntervalProxy.exponentialBackoff(initialTimeInterval: 1).capped(at: .seconds(8)).jittered(.decorrelated)
        var previous: Double?
        for retry in 1...200 {
            let f = full.delay(forRetry: retry).inSeconds
            #expect(f >= 0 && f <= min(8, full.baseDelay(forRetry: retry).inSeconds))
            let d = decorrelated.delay(forRetry: retry, previous: previous.map { .seconds($0) }).inSeconds
            #expect(d >= 1 && d <= 8)
            previous = d
        }
    }

    @Test func infinityAlwaysAllowsRetry() {
        var schedule = RetryCount.infinity(intervalProxy: .fixed(.milliseconds(500))).makeSchedule()
        for _ in 0..<1000 { #expect(schedule.nextDelay() == .milliseconds(500)) }
    }

    @available(*, deprecated, message: "exercises the seconds-based compatibility spellings")
    @Test func retryAfterIsBoundedByTheCap() {
        var schedule = RetryCount.count(count: 3, intervalProxy: IntervalProxy.fixed(timeInterval: 1).capped(at: .seconds(10))).makeSchedule()
        #expect(schedule.nextDelay(atLeast: .seconds(4)) == .seconds(4))
        #expect(schedule.nextDelay(atLeast: .seconds(60)) == .seconds(10))
    }

    @available(*, deprecated, message: "exercises the seconds-based compatibility spellings")
    @Test func invalidIntervalsWithNoNearestValidValueAreRejectedNamingTheParameter() async {
        await #expect(processExitsWith: .failure) {
            _ = IntervalProxy.exponentialBackoff(initialTimeInterval: .nan)
        }
        await #expect(processExitsWith: .failure) {
            _ = IntervalProxy.fixed(timeInterval: .infinity)
        }
        await #expect(processExitsWith: .failure) {
            _ = IntervalProxy.exponentialBackoff(initialTimeInterval: 1, scaleRate: .nan)
        }
    }

    @available(*, deprecated, message: "exercises the seconds-based compatibility spellings")
    @Test func outOfRangeValuesAreClampedAsMonstraDoes() {
        // A negative interval or cap is 0.
        #expect(IntervalProxy.fixed(timeInterval: -1).growth == .fixed(.zero))
        #expect(IntervalProxy.fixed(timeInterval: -.infinity).baseDelay(forRetry: 1).inSeconds == 0)
        #expect(IntervalProxy.fixed(timeInterval: 3).capped(at: .seconds(-2)).maximumDelay == .zero)
        #expect(IntervalProxy.fixed(timeInterval: 3).capped(at: .seconds(-2)).baseDelay(forRetry: 1).inSeconds == 0)
        // A rate below 1 acts as 1: the delay stays put instead of shrinking.
        let shrinking = IntervalProxy.exponentialBackoff(initialTimeInterval: 1, scaleRate: 0.5)
        #expect(shrinking.growth == .exponential(initial: .seconds(1), scaleRate: 1))
        #expect((1...3).map { shrinking.baseDelay(forRetry: $0).inSeconds } == [1, 1, 1])
        // A negative count is 0.
        let negative = IntervalProxy.exponentialBackoffBeforeFixed(
            initialTimeInterval: 2, originalInitialInterval: 1, maxExponentialBackoffCount: -3, scaleRate: 2
        )
        #expect((1...3).map { negative.baseDelay(forRetry: $0).inSeconds } == [2, 1, 1])
    }

    // MARK: Swift-first spellings

    @available(*, deprecated, message: "exercises the seconds-based compatibility spellings")
    @Test func durationSpellingsGiveTheSameDelaysAsTheSecondsOnes() {
        let proxy = IntervalProxy.exponential(initial: .seconds(1), scaleRate: 2).capped(at: .seconds(5))
        #expect(proxy == IntervalProxy.exponentialBackoff(initialTimeInterval: 1, scaleRate: 2).capped(at: .seconds(5)))
        #expect((1...5).map { proxy.baseDelay(forRetry: $0) } == [1, 2, 4, 5, 5].map { .seconds($0) })
        #expect(proxy.maximumDelay == .seconds(5))
        #expect(IntervalProxy.fixed(.milliseconds(500)) == .fixed(timeInterval: 0.5))
        #expect(IntervalProxy.exponential(maximumDelay: .seconds(3)) == .exponentialBackoff().capped(at: .seconds(3)))
        #expect(IntervalProxy.defaultInitialDelay == .seconds(1))
        #expect(
            IntervalProxy.exponentialThenFixed(initial: .seconds(1), scaleRate: 2, exponentialRetries: 2, fixed: .seconds(1))
                == .exponentialBackoffBeforeFixed(initialTimeInterval: 1, maxExponentialBackoffCount: 2, scaleRate: 2)
        )
        #expect(
            IntervalProxy.fixedThenExponential(first: .seconds(5), fixed: .seconds(1), fixedRetries: 1, scaleRate: 3)
                == .exponentialBackoffAfterFixed(
                    initialTimeInterval: 5, originalInitialInterval: 1, maxFixedCount: 1, scaleRate: 3
                )
        )
        #expect(IntervalProxy(growth: .fixed(.seconds(2)), maximumDelay: .seconds(1)).baseDelay(forRetry: 1) == .seconds(1))
    }

    @Test func durationJitterStaysInBounds() {
        var generator = SeededRandomNumberGenerator(seed: 19)
        let full = IntervalProxy.exponential(initial: .seconds(1), maximumDelay: .seconds(8), jitter: .full)
        let decorrelated = IntervalProxy.exponential(initial: .seconds(1)).capped(at: .seconds(8)).jittered(.decorrelated)
        var previous: Duration?
        for retry in 1...200 {
            let f = full.delay(forRetry: retry, using: &generator)
            #expect(f >= .zero && f <= full.baseDelay(forRetry: retry))
            let d = decorrelated.delay(forRetry: retry, previous: previous, using: &generator)
            #expect(d >= .seconds(1) && d <= .seconds(8))
            previous = d
        }
        #expect(full.delay(forRetry: 1) <= .seconds(1))
    }

    @Test func scheduleTakesADurationMinimumAndReportsTheLastDelay() {
        var schedule = RetryCount.count(count: 3, intervalProxy: .fixed(.seconds(1)).capped(at: .seconds(10))).makeSchedule()
        #expect(schedule.lastDelay == nil)
        #expect(schedule.nextDelay(atLeast: .seconds(4)) == .seconds(4))
        #expect(schedule.lastDelay == .seconds(4))
        #expect(schedule.nextDelay(atLeast: .seconds(60)) == .seconds(10))
        #expect(schedule.nextDelay() == .seconds(1))
        #expect(schedule.nextDelay(atLeast: .zero) == nil)
    }

    @Test func negativeDurationsAreClampedAndAnInvalidScaleRateIsRejected() async {
        #expect(IntervalProxy.fixed(.seconds(-1)).growth == .fixed(.zero))
        #expect(IntervalProxy.fixed(.seconds(3)).capped(at: .seconds(-2)).maximumDelay == .zero)
        #expect(IntervalProxy.exponential(initial: .seconds(-1)).baseDelay(forRetry: 3) == .zero)
        let negative = IntervalProxy.exponentialThenFixed(
            initial: .seconds(2), scaleRate: 2, exponentialRetries: -3, fixed: .seconds(-1)
        )
        #expect((1...3).map { negative.baseDelay(forRetry: $0) } == [.seconds(2), .zero, .zero])
        await #expect(processExitsWith: .failure) {
            _ = IntervalProxy.exponential(initial: .seconds(1), scaleRate: .nan)
        }
        await #expect(processExitsWith: .failure) {
            _ = IntervalProxy.fixedThenExponential(scaleRate: .infinity)
        }
    }

    @available(*, deprecated, message: "exercises the seconds-based compatibility spellings")
    @Test func secondsSpellingsNameTheirParameterWhenRejected() async throws {
        let nan = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = IntervalProxy.exponentialBackoff(initialTimeInterval: .nan)
        }
        #expect(String(decoding: nan.standardErrorContent, as: UTF8.self).contains("initialTimeInterval"))
        let fixed = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = IntervalProxy.fixed(timeInterval: .infinity)
        }
        #expect(String(decoding: fixed.standardErrorContent, as: UTF8.self).contains("timeInterval"))
    }

    // MARK: Monstra's names and strategies

    @available(*, deprecated, message: "exercises the seconds-based compatibility spellings")
    @Test func monstraNamesAndDefaults() {
        #expect(RetryCount.IntervalProxy.DefaultInitialTimeInterval == 1)
        #expect(RetryCount.IntervalProxy.DefaultExponentialBackoffScaleRate == 2)
        #expect(RetryCount.IntervalProxy.fixed() == .fixed(timeInterval: 0))
        let exponential: RetryCount.IntervalProxy = .exponentialBackoff()
        #expect(exponential == .exponentialBackoff(initialTimeInterval: 1, scaleRate: 2))
        var schedule = RetryCount.count(count: 3, intervalProxy: .exponentialBackoff()).makeSchedule()
        #expect([schedule.nextDelay(), schedule.nextDelay(), schedule.nextDelay()] == [.seconds(1), .seconds(2), .seconds(4)])
    }

    @available(*, deprecated, message: "exercises the seconds-based compatibility spellings")
    @Test func exponentialBackoffBeforeFixedGrowsThenSettlesOnTheOriginalInterval() {
        let proxy = RetryCount.IntervalProxy.exponentialBackoffBeforeFixed(
            initialTimeInterval: 1, maxExponentialBackoffCount: 2, scaleRate: 2
        )
        #expect((1...6).map { proxy.baseDelay(forRetry: $0).inSeconds } == [1, 2, 4, 1, 1, 1])
        let immediate = RetryCount.IntervalProxy.exponentialBackoffBeforeFixed(
            initialTimeInterval: 2, originalInitialInterval: 1, maxExponentialBackoffCount: 0, scaleRate: 2
        )
        #expect((1...3).map { immediate.baseDelay(forRetry: $0).inSeconds } == [2, 1, 1])
        #expect(RetryCount.IntervalProxy.exponentialBackoffBeforeFixed().baseDelay(forRetry: 5).inSeconds == 1)
    }

    @available(*, deprecated, message: "exercises the seconds-based compatibility spellings")
    @Test func exponentialBackoffAfterFixedHoldsThenGrows() {
        let proxy = RetryCount.IntervalProxy.exponentialBackoffAfterFixed(
            initialTimeInterval: 1, originalInitialInterval: 1, maxFixedCount: 2, scaleRate: 2
        )
        #expect((1...6).map { proxy.baseDelay(forRetry: $0).inSeconds } == [1, 1, 1, 2, 4, 8])
        let noFixedPhase = RetryCount.IntervalProxy.exponentialBackoffAfterFixed(
            initialTimeInterval: 3, originalInitialInterval: 1, maxFixedCount: 0, scaleRate: 2
        )
        #expect((1...3).map { noFixedPhase.baseDelay(forRetry: $0).inSeconds } == [3, 6, 12])
        let distinctFirst = RetryCount.IntervalProxy.exponentialBackoffAfterFixed(
            initialTimeInterval: 5, originalInitialInterval: 1, maxFixedCount: 1, scaleRate: 3
        )
        #expect((1...4).map { distinctFirst.baseDelay(forRetry: $0).inSeconds } == [5, 1, 3, 9])
        let capped = proxy.capped(at: .seconds(3))
        #expect(capped.baseDelay(forRetry: 6).inSeconds == 3)
        #expect(proxy.baseDelay(forRetry: .max).inSeconds > 1e12)  // saturates instead of trapping
    }
}

extension Duration {
    /// This duration in seconds, to compare delays with Monstra's seconds.
    var inSeconds: Double { self / .seconds(1) }
}
