import TaskKit
import Testing

/// A one-shot gate for tests: tasks ``wait(within:sourceLocation:)`` until the test
/// ``open()``s it, and the test can wait for a number of tasks to have arrived at it.
///
/// It is also the counting wait of the tests: ``arrive()`` counts an event without waiting, and
/// ``waitForArrivals(_:within:sourceLocation:)`` waits for a number of events.
///
/// Every wait has a deadline of real time (``TestDeadline/standard`` unless told): a wait still suspended then
/// returns, and records a test issue when it runs on behalf of a test, so a broken test fails
/// instead of hanging CI (a ``wait(within:sourceLocation:)`` ignores the task's cancellation, so
/// Swift Testing's `.timeLimit` alone could not end it). A wait in a detached task (a component's
/// own task, which may outlive the test that closed the gate) just returns. The deadline only
/// matters when a test is broken.
public final class TestGate: Sendable {
    private struct Waiter {
        var id: Int
        /// `nil` for a task waiting for the gate to open; otherwise the number of arrivals the
        /// test waits for.
        var arrivals: Int?
        var continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var isOpen = false
        var arrived = 0
        var nextID = 0
        var waiters: [Waiter] = []
        /// Waits whose deadline passed before they were registered.
        var expired: Set<Int> = []

        /// Counts one arrival; returns the waits for arrivals it satisfies, removed.
        mutating func arrive() -> [CheckedContinuation<Bool, Never>] {
            arrived += 1
            let arrived = self.arrived
            let ready = waiters.filter { ($0.arrivals ?? .max) <= arrived }.map(\.continuation)
            waiters.removeAll { ($0.arrivals ?? .max) <= arrived }
            return ready
        }

        mutating func take(_ id: Int) -> CheckedContinuation<Bool, Never>? {
            guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return waiters.remove(at: index).continuation
        }
    }

    private let state = LockedState(State())

    /// A closed gate.
    public init() {}

    /// Whether ``open()`` was called.
    public var isOpen: Bool { state.withLock { $0.isOpen } }

    /// How many tasks are suspended in ``wait(within:sourceLocation:)`` or
    /// ``waitOrCancel(within:sourceLocation:)``.
    public var waiting: Int { state.withLock { $0.waiters.filter { $0.arrivals == nil }.count } }

    /// How many calls of ``wait(within:sourceLocation:)``, ``waitOrCancel(within:sourceLocation:)``
    /// and ``arrive()`` have arrived so far, in total.
    public var arrivals: Int { state.withLock { $0.arrived } }

    /// Opens the gate: every waiting task resumes, and later waits return at once.
    public func open() {
        let opened = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            state.isOpen = true
            let opened = state.waiters.filter { $0.arrivals == nil }.map(\.continuation)
            state.waiters.removeAll { $0.arrivals == nil }
            return opened
        }
        for waiter in opened { waiter.resume(returning: true) }
    }

    /// Counts an arrival without waiting (whether the gate is open or not) and returns the
    /// number of arrivals so far, this one included.
    @discardableResult
    public func arrive() -> Int {
        let (count, ready) = state.withLock { state in (state.arrived + 1, state.arrive()) }
        for watcher in ready { watcher.resume(returning: true) }
        return count
    }

    /// Suspends until the gate opens, ignoring the task's cancellation; after `limit` of real
    /// time it records an issue and returns.
    public func wait(within limit: Duration = TestDeadline.standard, sourceLocation: SourceLocation = #_sourceLocation) async {
        let opened = await suspend(within: limit, cancellable: false, arrivals: nil)
        if !opened { Self.record("TestGate: still closed after \(limit)", sourceLocation) }
    }

    /// Suspends until the gate opens or the calling task is cancelled, whichever comes first;
    /// after `limit` of real time it records an issue and returns.
    public func waitOrCancel(within limit: Duration = TestDeadline.standard, sourceLocation: SourceLocation = #_sourceLocation) async {
        let opened = await suspend(within: limit, cancellable: true, arrivals: nil)
        if !opened { Self.record("TestGate: still closed after \(limit)", sourceLocation) }
    }

    /// Suspends until at least `count` waits and ``arrive()`` calls have arrived at the gate (in
    /// total); after `limit` of real time it records an issue and returns.
    public func waitForArrivals(
        _ count: Int, within limit: Duration = TestDeadline.standard, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let arrived = await suspend(within: limit, cancellable: false, arrivals: count)
        if !arrived { Self.record("TestGate: \(arrivals) of \(count) arrivals after \(limit)", sourceLocation) }
    }

    /// Records a missed deadline as an issue of the current test, if there is one.
    private static func record(_ message: String, _ sourceLocation: SourceLocation) {
        guard Test.current != nil else { return }
        Issue.record(Comment(rawValue: message), sourceLocation: sourceLocation)
    }

    /// Suspends as a waiter for the gate (`arrivals` nil, counted as an arrival) or for a number
    /// of arrivals; `false` when the deadline passed first.
    private func suspend(within limit: Duration, cancellable: Bool, arrivals: Int?) async -> Bool {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        let state = self.state
        let deadline = Task {
            try? await Task.sleep(for: limit)
            guard !Task.isCancelled else { return }  // the wait ended first
            let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                guard let waiter = state.take(id) else {
                    state.expired.insert(id)
                    return nil
                }
                return waiter
            }
            waiter?.resume(returning: false)
        }
        defer { deadline.cancel() }
        let register = {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let (now, ready) = state.withLock { state -> (Bool?, [CheckedContinuation<Bool, Never>]) in
                    let ready = arrivals == nil ? state.arrive() : []
                    if state.expired.remove(id) != nil { return (false, ready) }
                    if let arrivals, state.arrived >= arrivals { return (true, ready) }
                    if arrivals == nil, state.isOpen || (cancellable && Task.isCancelled) { return (true, ready) }
                    state.waiters.append(Waiter(id: id, arrivals: arrivals, continuation: continuation))
                    return (nil, ready)
                }
                for watcher in ready { watcher.resume(returning: true) }
                if let now { continuation.resume(returning: now) }
            }
        }
        guard cancellable else { return await register() }
        return await withTaskCancellationHandler(operation: register) {
            state.withLock { $0.take(id) }?.resume(returning: true)
        }
    }
}
