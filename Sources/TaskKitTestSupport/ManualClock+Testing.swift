import TaskKitTesting
import Testing

extension ManualClock {
    /// Suspends until at least `count` tasks are sleeping on this clock; after `limit` of real
    /// time it records an issue of the current test (if there is one) and returns. Returns at
    /// once, without an issue, when the calling task is cancelled.
    public func waitForSleepers(
        count: Int = 1, within limit: Duration = TestDeadline.standard, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        do {
            try await waitForSleepers(count: count, timeout: limit)
        } catch let timeout as ManualClock.WaitTimeout {
            guard Test.current != nil else { return }
            Issue.record(Comment(rawValue: timeout.description), sourceLocation: sourceLocation)
        } catch {
            // Cancelled: the test is ending.
        }
    }
}
