import TaskKit
import TaskKitTestSupport
import Testing

/// A thread-safe event log and counter that tests can wait on, with a deadline.
final class Recorder: Sendable {
    private let log = LockedState.make([String]())
    /// One arrival per recorded event, counted after the event is in `log`.
    private let arrivals = TestGate()

    init() {}

    func record(_ event: String) {
        log.withLock { $0.append(event) }
        arrivals.arrive()
    }

    var events: [String] { log.withLock { $0 } }

    /// Waits until at least `count` events were recorded; records an issue and returns after
    /// `limit`.
    func waitForEvents(
        count: Int, within limit: Duration = TestDeadline.standard, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        await arrivals.waitForArrivals(count, within: limit, sourceLocation: sourceLocation)
    }
}

/// Test-only escape hatch that lets a test deliberately break the isolation rules, to prove the
/// store's run-time checks trap. `@unchecked Sendable` is the whole point here: it smuggles a
/// non-Sendable store across actors, and is only used inside exit tests that expect a crash.
final class UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// A custom actor that owns a store, to run the store off the main actor.
actor StoreOwner {
    let store = TaskStore<Int>()

    func add(
        _ key: Int,
        _ behavior: TaskStoreDuplicateKeyBehavior = .cancelPrevious(wait: false),
        operation: @escaping @Sendable () async -> Void
    ) -> Task<Void, Never> {
        store.addTask(forKey: key, duplicateKeyBehavior: behavior, operation: operation)
    }

    func cancel(_ key: Int) { store.cancelTask(forKey: key) }
    func isRunning(_ key: Int) -> Bool { store.taskIsRunning(forKey: key) }
    var runningKeys: Set<Int> { store.runningKeys }
}

/// Yields the current task a few times, giving wrongly scheduled work a chance to run early.
func yieldALot(_ times: Int = 50) async {
    for _ in 0..<times { await Task.yield() }
}
