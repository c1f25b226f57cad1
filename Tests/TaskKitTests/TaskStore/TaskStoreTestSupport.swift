import TaskKit

/// A thread-safe event log and counter that tests can wait on.
final class Recorder: Sendable {
    private struct State {
        var events: [String] = []
        var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state = LockedState.make(State())

    init() {}

    func record(_ event: String) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.events.append(event)
            let count = state.events.count
            let ready = state.watchers.filter { $0.count <= count }.map(\.continuation)
            state.watchers.removeAll { $0.count <= count }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    var events: [String] { state.withLock { $0.events } }

    /// Waits until at least `count` events were recorded.
    func waitForEvents(count: Int) async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                if state.events.count >= count { return true }
                state.watchers.append((count, continuation))
                return false
            }
            if resumeNow { continuation.resume() }
        }
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
