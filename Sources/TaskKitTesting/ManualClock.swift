import TaskKit

/// A clock whose time moves only when a test says so.
///
/// Inject it wherever TaskKit takes a `clock:` (`MonoTask`, `KeyedMonoTask`,
/// `TaskManager`, retry delays, deadlines) and every wait of the code under test becomes a
/// step the test takes. Deterministic on any executor: code under test calls `sleep(until:)`,
/// which registers a sleeper; the test waits until the expected number of sleepers is registered
/// (``waitForSleepers(count:timeout:)``), then moves time with ``advance(by:)``, which resumes
/// every sleeper whose deadline has passed, in deadline order (sleepers due at the same instant
/// in the order they went to sleep). Cancelling a sleeping task resumes it at once with
/// `CancellationError`.
///
/// ```swift
/// let clock = ManualClock()
/// let cache = MonoTask<String>(resultExpireDuration: .seconds(60), clock: clock) { .success("token") }
/// _ = await cache.asyncExecute()
/// clock.advance(by: .seconds(60))
/// #expect(cache.currentResult == nil)   // expired, without waiting a minute
/// ```
///
/// Time never moves on its own: `now` changes only through ``advance(by:)``,
/// ``advance(to:)`` and ``advanceToNextDeadline()``.
public final class ManualClock: Clock, Sendable {
    /// A point on the manual time line: an offset from the clock's origin.
    public struct Instant: InstantProtocol, Sendable, Hashable, Comparable, CustomStringConvertible {
        /// The offset from the origin.
        public var offset: Duration

        /// Creates an instant at `offset` from the origin.
        public init(offset: Duration) { self.offset = offset }

        /// The instant `duration` after this one.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }

        /// The duration from this instant to `other` (negative when `other` is earlier).
        public func duration(to other: Instant) -> Duration { other.offset - offset }

        /// Whether `lhs` is earlier than `rhs`.
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }

        /// The offset from the origin, as `t+<offset>`.
        public var description: String { "t+\(offset)" }
    }

    /// The error ``ManualClock/waitForSleepers(count:timeout:)`` throws when its timeout passes
    /// before enough tasks sleep on the clock.
    public struct WaitTimeout: Error, Sendable, CustomStringConvertible {
        /// The number of sleepers the wait was for.
        public var expected: Int
        /// The number of tasks sleeping on the clock when the timeout passed.
        public var sleeping: Int
        /// The timeout of the wait (real time).
        public var timeout: Duration

        /// Describes the wait that timed out.
        public var description: String {
            "ManualClock: \(sleeping) of \(expected) sleepers after \(timeout)"
        }
    }

    fileprivate struct Sleeper {
        var id: UInt64
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>?
    }

    fileprivate struct Watcher {
        var id: UInt64
        var count: Int
        var continuation: CheckedContinuation<Void, any Error>
    }

    fileprivate struct State {
        var now = Instant(offset: .zero)
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
        var watchers: [Watcher] = []
        var totalSleeps = 0
        /// Sleepers cancelled before they registered.
        var cancelled: Set<UInt64> = []
        /// Watchers whose timeout passed before they registered.
        var expired: Set<UInt64> = []

        mutating func takeID() -> UInt64 {
            nextID += 1
            return nextID
        }
    }

    private let state = LockedState.make(State())

    /// Creates a clock at its origin (``Instant/offset`` zero).
    public init() {}

    /// The current instant: moved only by ``advance(by:)``, ``advance(to:)`` and
    /// ``advanceToNextDeadline()``.
    public var now: Instant { state.withLock { $0.now } }

    /// Zero: a manual clock wakes a sleeper exactly at its deadline.
    public var minimumResolution: Duration { .zero }

    /// The number of tasks currently sleeping on this clock.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// The number of `sleep` calls that ever registered a sleeper (a sleep whose deadline had
    /// already passed returns at once and is not counted).
    public var totalSleeps: Int { state.withLock { $0.totalSleeps } }

    /// Suspends until the clock is advanced to `deadline` or past it.
    ///
    /// Returns at once when `deadline` is not after ``now``. Throws `CancellationError` at once if
    /// the task is cancelled, before or while it sleeps. `tolerance` is ignored.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id: UInt64? = state.withLock { state in
            guard deadline > state.now else { return nil }
            return state.takeID()
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let (resumeNow, watchers) = state.withLock { state -> (Bool, [Watcher]) in
                    // Cancelled before it registered: the cancellation handler found nothing.
                    if state.cancelled.remove(id) != nil { return (true, []) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    state.totalSleeps += 1
                    return (false, state.takeSatisfiedWatchers())
                }
                if resumeNow { continuation.resume(throwing: CancellationError()) }
                for watcher in watchers { watcher.continuation.resume() }
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

    /// Moves time forward by `duration` and wakes every sleeper whose deadline has passed, in
    /// deadline order.
    ///
    /// - Precondition: `duration` is not negative.
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

    /// Moves time forward to `instant` (nothing happens if it is not after ``now``) and wakes the
    /// sleepers that are due.
    public func advance(to instant: Instant) {
        let delta = now.duration(to: instant)
        advance(by: max(delta, .zero))
    }

    /// Moves time forward to the earliest sleeper's deadline and wakes it (and any sleeper due
    /// at the same instant). Returns `false`, leaving the time as it is, when nobody sleeps.
    @discardableResult
    public func advanceToNextDeadline() -> Bool {
        guard let next = state.withLock({ $0.sleepers.map(\.deadline).min() }) else { return false }
        advance(to: next)
        return true
    }

    /// Suspends until at least `count` tasks are sleeping on this clock.
    ///
    /// Call it before ``advance(by:)`` so that the code under test has reached its sleep: time
    /// advanced earlier would pass before the sleep begins. Returns at once when `count` tasks
    /// already sleep.
    ///
    /// - Parameters:
    ///   - count: The number of sleepers to wait for.
    ///   - timeout: The longest the wait lasts, in real time (on `ContinuousClock`): a test
    ///     whose code never goes to sleep fails instead of hanging.
    /// - Throws: ``WaitTimeout`` when the timeout passes first; `CancellationError` when the
    ///   calling task is cancelled first.
    public func waitForSleepers(count: Int = 1, timeout: Duration) async throws {
        let state = self.state
        let id = state.withLock { $0.takeID() }
        let deadline = Task {
            try? await Task.sleep(for: timeout)
            guard !Task.isCancelled else { return }  // the wait ended first
            let (watcher, sleeping) = state.withLock { state -> (Watcher?, Int) in
                guard let watcher = state.takeWatcher(id) else {
                    state.expired.insert(id)
                    return (nil, state.sleepers.count)
                }
                return (watcher, state.sleepers.count)
            }
            watcher?.continuation.resume(throwing: WaitTimeout(expected: count, sleeping: sleeping, timeout: timeout))
        }
        defer { deadline.cancel() }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome = state.withLock { state -> Result<Void, any Error>? in
                    if state.expired.remove(id) != nil {
                        return .failure(WaitTimeout(expected: count, sleeping: state.sleepers.count, timeout: timeout))
                    }
                    if state.sleepers.count >= count { return .success(()) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.watchers.append(Watcher(id: id, count: count, continuation: continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            state.withLock { $0.takeWatcher(id) }?.continuation.resume(throwing: CancellationError())
        }
    }
}

extension ManualClock.State {
    fileprivate mutating func takeSatisfiedWatchers() -> [ManualClock.Watcher] {
        let count = sleepers.count
        let ready = watchers.filter { $0.count <= count }
        watchers.removeAll { $0.count <= count }
        return ready
    }

    fileprivate mutating func takeWatcher(_ id: UInt64) -> ManualClock.Watcher? {
        guard let index = watchers.firstIndex(where: { $0.id == id }) else { return nil }
        return watchers.remove(at: index)
    }
}
