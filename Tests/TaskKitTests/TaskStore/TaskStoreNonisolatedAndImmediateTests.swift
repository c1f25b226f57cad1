import Observation
import Testing
import TaskKit
import TaskKitTestSupport

/// A nonisolated synchronous helper: inside it `#isolation` is `nil`, even when an actor calls it.
nonisolated func addThroughNonisolatedHelper(
    _ store: TaskStore<Int>, key: Int, gate: TestGate
) -> Task<Void, Never> {
    store.addTask(forKey: key) { await gate.wait() }
}

extension StoreOwner {
    /// Binds the store to this actor, then adds through a nonisolated helper.
    func addThroughHelper(_ key: Int, gate: TestGate) async -> Task<Void, Never> {
        await store.addTask(forKey: 0) {}.value
        return addThroughNonisolatedHelper(store, key: key, gate: gate)
    }

    var runningTaskCount: Int { store.runningTaskCount }
}

/// A store used from nonisolated code, `runningTaskCount`, `currentTask(forKey:)`, and immediate
/// tasks.
@Suite(.scaledTimeLimit(minutes: 1)) struct TaskStoreNonisolatedAndImmediateTests {
    // MARK: Nonisolated use

    @Test func aStoreCreatedAndUsedFromNonisolatedCodeWorks() async throws {
        let store = TaskStore<Int>()
        let gate = TestGate()
        let task = store.addTask(forKey: 1) { await gate.wait() }
        #expect(store.taskIsRunning(forKey: 1))
        #expect(store.runningTaskCount == 1)
        gate.open()
        try await task.boundedValue()
        #expect(!store.taskIsRunning(forKey: 1))
        #expect(store.runningKeys.isEmpty)
        #expect(store.runningTaskCount == 0)
        let value = store.addTask(forKey: 2) { () async throws -> Int in 42 }
        #expect(try await value.boundedValue() == 42)
        #expect(store.runningTaskCount == 0)
    }

    @Test func explicitNilIsolationWorksForEveryChangingCall() async throws {
        let store = TaskStore<Int>()
        let log = Recorder()
        let first = store.addTask(forKey: 1, isolation: nil) {
            await withTaskCancellationHandler {
                await TestGate().waitOrCancel()
            } onCancel: {}
            log.record("first cancelled: \(Task.isCancelled)")
        }
        let second = store.addTask(forKey: 2, isolation: nil) { await TestGate().waitOrCancel() }
        store.cancelTask(forKey: 1, isolation: nil)
        try await first.boundedValue()
        #expect(log.events == ["first cancelled: true"])
        store.cancelAllTasks(isolation: nil)
        try await second.boundedValue()
        #expect(store.runningTaskCount == 0)
    }

    @Test func duplicateKeyBehavioursWorkFromNonisolatedCode() async throws {
        let store = TaskStore<Int>()
        let log = Recorder()
        let gateA = TestGate()
        let a = store.addTask(forKey: 1) {
            log.record("A start")
            await gateA.wait()
            log.record("A end")
        }
        await log.waitForEvents(count: 1)
        let b = store.addTask(forKey: 1, duplicateKeyBehavior: .wait) { log.record("B") }
        let c = store.addTask(forKey: 1, duplicateKeyBehavior: .runConcurrently) { log.record("C") }
        try await c.boundedValue()
        #expect(store.runningTaskCount == 1, "B replaced A in the table (it waits for A); C finished")
        gateA.open()
        try await a.boundedValue()
        try await b.boundedValue()
        #expect(log.events == ["A start", "C", "A end", "B"])
        #expect(!store.taskIsRunning(forKey: 1))
    }

    @Test func aTaskStartedFromNonisolatedCodeNotifiesObserversWhenItEnds() async throws {
        let store = TaskStore<Int>()
        let gate = TestGate()
        let task = store.addTask(forKey: 1) { await gate.wait() }
        let changed = Recorder()
        withObservationTracking {
            _ = store.taskIsRunning(forKey: 1)
        } onChange: {
            changed.record("changed")
        }
        gate.open()
        await changed.waitForEvents(count: 1)
        try await task.boundedValue()
        #expect(!store.taskIsRunning(forKey: 1))
    }

    @Test func aNilIsolationCallOnTheOwningActorsExecutorIsAccepted() async throws {
        let owner = StoreOwner()
        let gate = TestGate()
        let task = await owner.addThroughHelper(5, gate: gate)
        #expect(await owner.isRunning(5))
        gate.open()
        try await task.boundedValue()
        #expect(await owner.isRunning(5) == false)
        #expect(await owner.runningTaskCount == 0)
    }

    // MARK: runningTaskCount and currentTask(forKey:)

    @Test @MainActor func runningTaskCountCountsTasksNotKeys() async throws {
        let store = TaskStore<Int>()
        let gate = TestGate()
        let tasks = [
            store.addTask(forKey: 1) { await gate.wait() },
            store.addTask(forKey: 1, duplicateKeyBehavior: .runConcurrently) { await gate.wait() },
            store.addTask(forKey: 2) { await gate.wait() },
        ]
        #expect(store.runningTaskCount == 3)
        #expect(store.runningKeys.count == 2)
        gate.open()
        for task in tasks { try await task.boundedValue() }
        #expect(store.runningTaskCount == 0)
    }

    @Test @MainActor func currentTaskHandsOutTheNewestTaskOfAKey() async throws {
        let store = TaskStore<String>()
        #expect(store.currentTask(forKey: "a") == nil)
        let gate = TestGate()
        let plain = store.addTask(forKey: "a") { await gate.wait() }
        #expect(store.currentTask(forKey: "a") == plain)
        let typed = store.addTask(forKey: "b") { () async throws -> Int in
            await gate.wait()
            return 7
        }
        #expect(store.currentTask(forKey: "b", returning: Int.self) == typed)
        #expect(store.currentTask(forKey: "b", returning: String.self) == nil)
        let waiting = try #require(store.currentTask(forKey: "b"))
        gate.open()
        try await waiting.boundedValue()
        #expect(try await typed.boundedValue() == 7)
        try await plain.boundedValue()
        #expect(store.currentTask(forKey: "a") == nil)
        #expect(store.currentTask(forKey: "b") == nil)
    }

    @Test @MainActor func cancellingTheVoidViewOfAValueTaskCancelsIt() async throws {
        let store = TaskStore<Int>()
        let typed = store.addTask(forKey: 1) { () async throws -> Bool in
            await TestGate().waitOrCancel()
            return Task.isCancelled
        }
        store.currentTask(forKey: 1)?.cancel()
        #expect(try await typed.boundedValue() == true)
    }

    // MARK: addImmediateTask

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test @MainActor func anImmediateTaskStartsBeforeTheCallReturns() async throws {
        let store = TaskStore<Int>()
        let log = Recorder()
        let gate = TestGate()
        let task = store.addImmediateTask(forKey: 1) {
            log.record("started")
            await gate.wait()
            log.record("ended")
        }
        #expect(log.events == ["started"])
        #expect(store.taskIsRunning(forKey: 1))
        gate.open()
        try await task.boundedValue()
        #expect(!store.taskIsRunning(forKey: 1))
        #expect(log.events == ["started", "ended"])
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test @MainActor func anImmediateTaskThatNeverSuspendsLeavesTheKeyIdle() async throws {
        let store = TaskStore<Int>()
        let log = Recorder()
        let task = store.addImmediateTask(forKey: 1) { log.record("ran") }
        #expect(log.events == ["ran"])
        #expect(!store.taskIsRunning(forKey: 1))
        #expect(store.runningTaskCount == 0)
        try await task.boundedValue()
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test @MainActor func immediateTasksApplyTheDuplicateKeyBehaviours() async throws {
        let store = TaskStore<Int>()
        let log = Recorder()
        let previous = store.addTask(forKey: 1) {
            await TestGate().waitOrCancel()
            log.record("previous cancelled: \(Task.isCancelled)")
        }
        // preferPrevious: nothing runs, the running task comes back.
        let kept = store.addImmediateTask(forKey: 1, duplicateKeyBehavior: .preferPrevious) { log.record("never") }
        #expect(kept == previous)
        // runConcurrently: runs at once beside it.
        let gate = TestGate()
        let beside = store.addImmediateTask(forKey: 1, duplicateKeyBehavior: .runConcurrently) {
            log.record("beside")
            await gate.wait()
        }
        #expect(store.runningTaskCount == 2)
        // wait: starts, but the operation waits for the running tasks.
        let waiting = store.addImmediateTask(forKey: 1, duplicateKeyBehavior: .wait) { log.record("waited") }
        #expect(log.events == ["beside"])
        gate.open()
        try await beside.boundedValue()
        // cancelPrevious (the default): the operation starts at once, then the previous tasks
        // are cancelled (the waiting one, and through it the first).
        let latest = store.addImmediateTask(forKey: 1) { log.record("latest") }
        try await previous.boundedValue()
        try await waiting.boundedValue()
        try await latest.boundedValue()
        #expect(log.events.first == "beside")
        #expect(log.events.contains("latest"))
        #expect(log.events.contains("previous cancelled: true"))
        #expect(!log.events.contains("never"))
        #expect(store.runningTaskCount == 0)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test func anImmediateTaskFromNonisolatedCodeWorks() async throws {
        let store = TaskStore<Int>()
        let log = Recorder()
        let gate = TestGate()
        let task = store.addImmediateTask(forKey: 1) {
            log.record("started")
            await gate.wait()
        }
        #expect(log.events == ["started"])
        #expect(store.taskIsRunning(forKey: 1))
        gate.open()
        try await task.boundedValue()
        #expect(!store.taskIsRunning(forKey: 1))
    }
}
