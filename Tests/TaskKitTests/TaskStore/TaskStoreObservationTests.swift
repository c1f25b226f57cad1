import Observation
import Testing
import TaskKit
import TaskKitTestSupport

/// `withObservationTracking` (what SwiftUI uses) sees keys start and stop running.
@MainActor
@Suite struct TaskStoreObservationTests {
    let store = TaskStore<Int>()
    let changes = Recorder()

    func observeKey(_ key: Int) {
        withObservationTracking {
            _ = store.taskIsRunning(forKey: key)
        } onChange: { [changes] in
            changes.record("change")
        }
    }

    @Test func observersAreNotifiedWhenAKeyStartsAndStopsButNotWhenItsTaskIsReplaced() async throws {
        let gateA = TestGate(), gateB = TestGate()
        observeKey(1)
        let a = store.addTask(forKey: 1) { await gateA.wait() }
        #expect(changes.events.count == 1, "starting a key notifies (synchronously, before the change)")

        observeKey(1)
        let b = store.addTask(forKey: 1, duplicateKeyBehavior: .runConcurrently) { await gateB.wait() }
        #expect(changes.events.count == 1, "adding under an already running key is not a change")
        gateA.open()
        try await a.boundedValue()
        #expect(changes.events.count == 1, "the key still runs (b)")
        #expect(store.taskIsRunning(forKey: 1))

        gateB.open()
        try await b.boundedValue()
        #expect(changes.events.count == 2, "the key stopped")
        #expect(!store.taskIsRunning(forKey: 1))
    }

    @Test func aReplacedTaskFinishingDoesNotNotify() async throws {
        let gateA = TestGate(), gateB = TestGate()
        let a = store.addTask(forKey: 1) { await gateA.wait() }
        let b = store.addTask(forKey: 1, duplicateKeyBehavior: .cancelPrevious(wait: false)) { await gateB.wait() }
        observeKey(1)
        gateA.open()
        try await a.boundedValue()
        #expect(changes.events.isEmpty)
        gateB.open()
        try await b.boundedValue()
        #expect(changes.events.count == 1)
    }

    @Test func runningKeysIsObservable() async throws {
        withObservationTracking {
            _ = store.runningKeys
        } onChange: { [changes] in
            changes.record("keys")
        }
        let task = store.addTask(forKey: 7) {}
        #expect(changes.events == ["keys"])
        try await task.boundedValue()
        #expect(store.runningKeys.isEmpty)
    }
}
