import Testing

/// Checks `condition` again and again until it holds; returns whether it held.
///
/// The one polling wait of TaskKit's tests, for a *state* (of a component, a server, a process),
/// never for a time. A condition still false after `limit` of real time records a test issue
/// naming `what` and returns `false`: a failing wait fails its test instead of hanging CI. The
/// default limit is ``TestDeadline/standard``; it only matters when a test is broken.
///
/// Between checks it yields, and every 64th check sleeps a millisecond (kind to a loaded
/// machine); with `interval`, it sleeps that long between checks instead (for a condition that
/// costs a round trip, such as a database query). It runs on the caller's actor, so `condition`
/// may read that actor's state.
@discardableResult
public func eventually(
    _ what: String = "",
    within limit: Duration = TestDeadline.standard,
    pollingEvery interval: Duration? = nil,
    sourceLocation: SourceLocation = #_sourceLocation,
    isolation: isolated (any Actor)? = #isolation,
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now.advanced(by: limit)
    var checks = 0
    while !(try await condition()) {
        guard ContinuousClock.now < deadline else {
            Issue.record("condition still false after \(limit)\(what.isEmpty ? "" : ": \(what)")", sourceLocation: sourceLocation)
            return false
        }
        checks += 1
        if let interval {
            try? await Task.sleep(for: interval)
        } else if checks % 64 == 0 {
            try? await Task.sleep(for: .milliseconds(1))
        } else {
            await Task.yield()
        }
    }
    return true
}
