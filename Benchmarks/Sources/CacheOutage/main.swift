// An upstream outage under a KeyedMonoTask, with and without a fail-safe (issue 51):
//
//   swift run -c release CacheOutage [seconds]     (default 30: the loader fails for the middle third)
//
// 1,000 keys that live 1 s, read by 8 concurrent readers (each: 50 reads of random keys, then a
// 1 ms pause, as a server's request handlers would), over a loader that answers in 1 ms and,
// for the middle third of the run, fails. Reported for each mode: the reads, the errors of keys
// that had a value before (the fail-safe's promise: none) and of keys that never had one, the
// loader calls in all and during the outage, and the fewest time between two loader calls of
// one key during the outage (the fail-safe's throttle promises no less than its throttle).

import Foundation
import Synchronization
import TaskKit

struct Upstream: Error {}

let keyCount = 1_000
let readers = 8
let seconds = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 30
let throttle = Duration.seconds(2)

/// What one run saw.
struct Outcome {
    var reads = 0
    var errorsWithValue = 0
    var errorsWithoutValue = 0
    var loaderCalls = 0
    var loaderCallsInOutage = 0
    var smallestGapInOutage: Duration?
}

func run(failSafe: FailSafe?) async -> Outcome {
    let start = ContinuousClock.now
    let outageStart = start + .seconds(seconds) / 3
    let outageEnd = start + .seconds(seconds) * 2 / 3
    let end = start + .seconds(seconds)
    // Per key: whether it ever had a value, and when the loader was last called for it in the
    // outage. Written by the loader (about a thousand calls a second), read on errors.
    struct Keys {
        var hadValue = [Bool](repeating: false, count: keyCount)
        var lastCallInOutage = [ContinuousClock.Instant?](repeating: nil, count: keyCount)
        var calls = 0
        var callsInOutage = 0
        var smallestGap: Duration?
    }
    final class Shared: Sendable {
        let state = Mutex(Keys())
    }
    let shared = Shared()
    let cache = KeyedMonoTask<Int, Int>(
        maximumEntries: keyCount, resultExpireDuration: .seconds(1), failSafe: failSafe
    ) { key in
        try await Task.sleep(for: .milliseconds(1))
        let now = ContinuousClock.now
        let failing = now >= outageStart && now < outageEnd
        shared.state.withLock { keys in
            keys.calls += 1
            if failing {
                keys.callsInOutage += 1
                if let last = keys.lastCallInOutage[key] {
                    keys.smallestGap = min(keys.smallestGap ?? .seconds(3_600), now - last)
                }
                keys.lastCallInOutage[key] = now
            } else {
                keys.hadValue[key] = true
            }
        }
        if failing { throw Upstream() }
        return key
    }
    let counts = await withTaskGroup(of: (Int, Int, Int).self) { group in
        for _ in 0..<readers {
            group.addTask {
                var random = SystemRandomNumberGenerator()
                var (reads, withValue, withoutValue) = (0, 0, 0)
                while ContinuousClock.now < end {
                    for _ in 0..<50 {
                        let key = Int.random(in: 0..<keyCount, using: &random)
                        reads += 1
                        do {
                            _ = try await cache.value(for: key)
                        } catch {
                            if shared.state.withLock({ $0.hadValue[key] }) { withValue += 1 } else { withoutValue += 1 }
                        }
                    }
                    try? await Task.sleep(for: .milliseconds(1))
                }
                return (reads, withValue, withoutValue)
            }
        }
        var sum = (0, 0, 0)
        for await (reads, withValue, withoutValue) in group {
            sum.0 += reads
            sum.1 += withValue
            sum.2 += withoutValue
        }
        return sum
    }
    return shared.state.withLock { keys in
        Outcome(
            reads: counts.0, errorsWithValue: counts.1, errorsWithoutValue: counts.2, loaderCalls: keys.calls,
            loaderCallsInOutage: keys.callsInOutage, smallestGapInOutage: keys.smallestGap
        )
    }
}

print("CacheOutage: \(keyCount) keys living 1 s, \(readers) readers, \(seconds) s, the loader failing from \(seconds / 3) s to \(seconds * 2 / 3) s")
print("| mode | reads | errors, keys that had a value | errors, keys that never had one | loader calls | in the outage | smallest gap between two calls of a key in the outage |")
print("|---|---|---|---|---|---|---|")
for (name, failSafe) in [
    ("no fail-safe", nil), ("FailSafe(maximumStaleness: 60 s, throttle: 2 s)", FailSafe(maximumStaleness: .seconds(60), throttle: throttle)),
] as [(String, FailSafe?)] {
    let outcome = await run(failSafe: failSafe)
    let gap = outcome.smallestGapInOutage.map { "\($0)" } ?? "—"
    print(
        "| \(name) | \(outcome.reads) | \(outcome.errorsWithValue) | \(outcome.errorsWithoutValue) | \(outcome.loaderCalls) | \(outcome.loaderCallsInOutage) | \(gap) |"
    )
}
