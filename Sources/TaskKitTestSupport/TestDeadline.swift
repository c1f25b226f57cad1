import Foundation
import Testing

/// The real-time limit of a test's waits when the wait names none.
///
/// Every wait in ``TestGate``, ``eventually(_:within:pollingEvery:sourceLocation:isolation:_:)``,
/// `ManualClock.waitForSleepers` and `Task.boundedValue` is a hang guard: it only matters when a
/// test is broken, and then it turns a hang into a failure. ``standard`` is 30 seconds, multiplied
/// by the number in the environment variable `TASKKIT_TEST_DEADLINE_SCALE` when it is set (a
/// positive number; anything else is ignored). Set it for runs that are slow by design: a
/// sanitizer build beside other test processes on a loaded machine can take minutes for what
/// takes milliseconds unloaded. TaskKit's CI sets it to 10 for its sanitizer runs.
public enum TestDeadline {
    /// 30 seconds, times `TASKKIT_TEST_DEADLINE_SCALE` when that is a positive number.
    public static let standard: Duration = scaled(.seconds(30))

    /// The factor read from `TASKKIT_TEST_DEADLINE_SCALE`: 1 when it is unset or not a positive
    /// number.
    public static let scale: Double = scale(from: ProcessInfo.processInfo.environment["TASKKIT_TEST_DEADLINE_SCALE"])

    /// The factor a value of `TASKKIT_TEST_DEADLINE_SCALE` means: a positive finite number, or 1.
    public static func scale(from text: String?) -> Double {
        guard let text, let value = Double(text), value.isFinite, value > 0 else { return 1 }
        return value
    }

    /// `limit` times ``scale``: for a test whose own limit should grow with the run's slowness.
    public static func scaled(_ limit: Duration) -> Duration {
        limit * scale
    }
}

extension Trait where Self == TimeLimitTrait {
    /// Swift Testing's `.timeLimit(.minutes(minutes))`, times ``TestDeadline/scale`` (rounded
    /// up): a test's hang guard that grows with a run slow by design, as ``TestDeadline/standard``
    /// does for the waits.
    public static func scaledTimeLimit(minutes: Int) -> Self {
        .timeLimit(.minutes(Int((Double(minutes) * TestDeadline.scale).rounded(.up))))
    }
}
