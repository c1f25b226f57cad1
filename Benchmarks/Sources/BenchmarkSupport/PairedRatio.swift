// Same-run, interleaved comparison of a subject with its hand-written alternative.

/// The durations of one paired sample: the subject and the baseline, each run `rounds` times,
/// interleaved.
public struct PairedDurations: Sendable {
    /// The subject's total time.
    public var subject: Duration = .zero
    /// The baseline's total time.
    public var baseline: Duration = .zero

    /// The subject's time in percent of the baseline's (100 = same speed, 130 = 30% slower).
    public var percent: Int {
        let subjectSeconds = Double(subject.components.seconds) + Double(subject.components.attoseconds) * 1e-18
        let baselineSeconds = Double(baseline.components.seconds) + Double(baseline.components.attoseconds) * 1e-18
        return Int((subjectSeconds / baselineSeconds * 100).rounded())
    }

    /// `duration` per unit in nanoseconds (for per-caller or per-task figures).
    public static func nanoseconds(_ duration: Duration, per units: Int) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int((Double(seconds) * 1e9 + Double(attoseconds) * 1e-9) / Double(units))
    }
}

/// Runs `subject` and `baseline` `rounds` times each, alternating which goes first in every
/// round (subject–baseline, then baseline–subject, …), so that neither side always runs on a
/// warmer or quieter machine; returns each side's total time.
public func pairedDurations(
    rounds: Int, subject: () async -> Void, baseline: () async -> Void
) async -> PairedDurations {
    let clock = ContinuousClock()
    var result = PairedDurations()
    for round in 0..<rounds {
        if round.isMultiple(of: 2) {
            result.subject += await clock.measure { await subject() }
            result.baseline += await clock.measure { await baseline() }
        } else {
            result.baseline += await clock.measure { await baseline() }
            result.subject += await clock.measure { await subject() }
        }
    }
    return result
}
