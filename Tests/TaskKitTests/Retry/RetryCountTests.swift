import Testing
import TaskKit

@Suite struct RetryCountTests {
    @Test func integerLiteralMeansRetryCount() {
        let zero: RetryCount = 0
        let three: RetryCount = 3
        #expect(zero == .never)
        #expect(three.maximumRetries == 3)
    }

    @Test func countMeansExactlyThatManyRetries() {
        var schedule = RetryCount.count(count: 2, intervalProxy: .fixed(timeInterval: 1)).makeSchedule()
        #expect(schedule.nextDelay() == .seconds(1))
        #expect(schedule.nextDelay() == .seconds(1))
        #expect(schedule.nextDelay() == nil)
        var none = RetryCount.count(count: 0).makeSchedule()
        #expect(none.nextDelay() == nil)
        var never = RetryCount.never.makeSchedule()
        #expect(never.nextDelay() == nil)
    }

    @Test func exponentialBackoffGrowsAndIsCapped() {
        let proxy = IntervalProxy.exponentialBackoff(initialTimeInterval: 1, scaleRate: 2).capped(at: 5)
        #expect((1...5).map { proxy.baseTimeInterval(forRetry: $0) } == [1, 2, 4, 5, 5])
        #expect(proxy.baseTimeInterval(forRetry: 10_000) == 5)
        let uncapped = IntervalProxy.exponentialBackoff(initialTimeInterval: 1)
        #expect(uncapped.baseTimeInterval(forRetry: 100_000).isFinite)
    }

    @Test func jitterStaysInBounds() {
        let full = IntervalProxy.exponentialBackoff(initialTimeInterval: 1).capped(at: 8).jittered(.full)
        let decorrelated = IntervalProxy.exponentialBackoff(initialTimeInterval: 1).capped(at: 8).jittered(.decorrelated)
        var previous: Double?
        for retry in 1...200 {
            let f = full.timeInterval(forRetry: retry)
            #expect(f >= 0 && f <= min(8, full.baseTimeInterval(forRetry: retry)))
            let d = decorrelated.timeInterval(forRetry: retry, previous: previous)
            #expect(d >= 1 && d <= 8)
            previous = d
        }
    }

    @Test func infinityAlwaysAllowsRetry() {
        var schedule = RetryCount.infinity(intervalProxy: .fixed(timeInterval: 0.5)).makeSchedule()
        for _ in 0..<1000 { #expect(schedule.nextDelay() == .milliseconds(500)) }
    }

    @Test func retryAfterIsBoundedByTheCap() {
        var schedule = RetryCount.count(count: 3, intervalProxy: IntervalProxy.fixed(timeInterval: 1).capped(at: 10)).makeSchedule()
        #expect(schedule.nextDelay(atLeast: 4) == .seconds(4))
        #expect(schedule.nextDelay(atLeast: 60) == .seconds(10))
    }

    @Test func invalidIntervalsAreRejectedNamingTheParameter() async {
        await #expect(processExitsWith: .failure) {
            _ = IntervalProxy.fixed(timeInterval: -1)
        }
        await #expect(processExitsWith: .failure) {
            _ = IntervalProxy.exponentialBackoff(initialTimeInterval: .nan)
        }
        await #expect(processExitsWith: .failure) {
            _ = IntervalProxy.exponentialBackoff(initialTimeInterval: 1, scaleRate: 0.5)
        }
    }
}
