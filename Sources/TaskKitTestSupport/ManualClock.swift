import TaskKit
import Testing

/// A clock whose time moves only when a test says so.
///
/// Deterministic without any special executor: code under test calls `sleep(until:)`, which
/// registers a sleeper; the test waits until the expected number of sleepers is registered
/// (``waitForSleepers(count:)``), then moves time with ``advance(by:)``, which resumes every
/// sleeper whose deadline has passed, in deadline order. Cancelling a sleeping task resumes it
/// at once with `CancellationError`.
public final class ManualClock: Clock, Sendable {
    /// A point on the manual time line: an offset from the clock's origin.
    public struct Instant: InstantProtocol, Sendable, Hashable, Comparable, CustomStringConvertible {
        /// The offset from the origin.
        public var offset: Duration

        /// Creates an instant at `offset` from the origin.
        public init(offset: Duration) { self.offset = offset }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "t+\(offset)" }
    }

    fileprivate struct Sleeper {
        var id: UInt64
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>?
    }

    fileprivate struct Watcher {
        var count: Int
        /// Opened when `count` tasks sleep: the ``TestGate`` gives the wait its deadline.
        var gate: TestGate
    }

    fileprivate struct State {
        var now = Instant(offset: .zero)
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
        var watchers: [Watcher] = []
        var totalSleeps = 0
        var cancelled: Set<UInt64> = []
    }

    private let state = LockedState.make(State())

    /// Creates a clock at its origin.
    public init() {}

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// The number of tasks currently sleeping on this clock.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// The number of `sleep` calls that ever registered a sleeper.
    public var totalSleeps: Int { state.withLock { $0.totalSleeps } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id: UInt64? = state.withLock { state in
            guard deadline > state.now else { return nil }
            state.nextID += 1
            return state.nextID
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (resumeNow, watchers) = state.withLock { state -> (Bool, [Watcher]) in
                    // Cancelled before we registered: the cancel handler found nothing, finish here.
                    if state.cancelled.contains(id) {
                        state.cancelled.remove(id)
                        return (true, [])
                    }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    state.totalSleeps += 1
                    return (false, state.takeSatisfiedWatchers())
                }
                if resumeNow { continuation.resume(throwing: CancellationError()) }
                for watcher in watchers { watcher.gate.open() }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                if let index = state.sleepers.firstIndex(where: { $0.id == id }) {
                    return state.sleepers.remove(at: index).continuation
                }
                state.cancelled.insert(id)
                return nil
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward by `duration` and wakes every sleeper whose deadline has passed.
    public func advance(by duration: Duration = .zero) {
        precondition(duration >= .zero, "ManualClock.advance(by:): duration must be >= 0, got \(duration)")
        let due = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.sorted { ($0.deadline, $0.id) < ($1.deadline, $1.id) }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.continuation?.resume() }
    }

    /// Moves time forward to `instant` (no-op if it is in the past) and wakes due sleepers.
    public func advance(to instant: Instant) {
        let delta = now.duration(to: instant)
        advance(by: max(delta, .zero))
    }

    /// Moves time forward to the earliest sleeper's deadline and wakes it (and any sleeper due
    /// at the same instant). Returns `false` when nobody sleeps.
    @discardableResult
    public func advanceToNextDeadline() -> Bool {
        guard let next = state.withLock({ $0.sleepers.map(\.deadline).min() }) else { return false }
        advance(to: next)
        return true
    }

    /// Suspends until at least `count` tasks are sleeping on this clock; after `limit` of real
    /// time it records an issue and returns (see ``TestGate``).
    public func waitForSleepers(
        count: Int = 1, within limit: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let gate = state.withLock { state -> TestGate? in
            if state.sleepers.count >= count { return nil }
            let gate = TestGate()
            state.watchers.append(Watcher(count: count, gate: gate))
            return gate
        }
        await gate?.wait(within: limit, sourceLocation: sourceLocation)
    }
}

extension ManualClock.State {
    fileprivate mutating func takeSatisfiedWatchers() -> [ManualClock.Watcher] {
        let count = sleepers.count
        let ready = watchers.filter { $0.count <= count }
        watchers.removeAll { $0.count <= count }
        return ready
    }
}
