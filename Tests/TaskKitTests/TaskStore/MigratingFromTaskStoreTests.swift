import Observation
import Testing
import TaskKit
import TaskKitTestSupport

/// The TaskStore blog's and published package's examples in their TaskKit form, one test per row
/// of "Migrating from TaskStore" (TaskKit.docc/MigratingFromTaskStore.md).
@Suite(.scaledTimeLimit(minutes: 1)) @MainActor struct MigratingFromTaskStoreTests {
    /// The blog's model.
    @Observable @MainActor final class MyModel {
        enum TaskKey: Hashable { case doThing, viewTask }
        var someText = ""
        let taskStore = TaskStore<TaskKey>()
        let gate = TestGate()

        var doThingButtonEnabled: Bool { !taskStore.taskIsRunning(forKey: .doThing) }
        var showCancelButton: Bool { taskStore.taskIsRunning(forKey: .doThing) }

        func doThingButtonTapped() {
            taskStore.addTask(forKey: .doThing) {
                await self.gate.wait()
                await self.doThingResponse()
            }
        }

        func cancelButtonTapped() { taskStore.cancelTask(forKey: .doThing) }

        private func doThingResponse() {
            guard !Task.isCancelled else { return }
            someText += "!"
        }

        func viewTask() -> Task<Void, Never> {
            taskStore.addTask(forKey: .viewTask) { await self.gate.wait() }
        }
    }

    @Test func theBlogsModel() async {
        let model = MyModel()
        model.doThingButtonTapped()
        #expect(!model.doThingButtonEnabled && model.showCancelButton)
        let running = model.taskStore.currentTask(forKey: .doThing)
        model.gate.open()
        await running?.value
        #expect(model.someText == "!")
        #expect(model.doThingButtonEnabled)
    }

    @Test func cancelTaskAndCancelAllTasks() async {
        let model = MyModel()
        model.doThingButtonTapped()
        let running = model.taskStore.currentTask(forKey: .doThing)
        model.cancelButtonTapped()
        model.gate.open()
        await running?.value
        #expect(model.someText == "")
        let view = model.viewTask()
        model.taskStore.cancelAllTasks()
        await view.value
        #expect(model.taskStore.runningTaskCount == 0)
    }

    @Test func viewTaskWithCancellableValue() async throws {
        // `.task { await model.viewTask().cancellableValue }`: cancelling the awaiting task
        // cancels the store's task.
        let model = MyModel()
        let view = model.taskStore.addTask(forKey: .viewTask) { await TestGate().waitOrCancel() }
        let outer = Task { await view.cancellableValue }
        #expect(model.taskStore.taskIsRunning(forKey: .viewTask))
        outer.cancel()
        try await outer.boundedValue()
        await view.value
        #expect(!model.taskStore.taskIsRunning(forKey: .viewTask))
    }

    @available(*, deprecated, message: "exercises the TaskStore package's read-outs, kept as deprecated aliases")
    @Test func duplicateKeyBehaviours() async throws {
        let store = TaskStore<String>()
        let log = Recorder()
        let gate = TestGate()
        store.addTask(forKey: "save") { await gate.wait(); log.record("first save") }
        store.addTask(forKey: "save", duplicateKeyBehavior: .wait) { log.record("second save") }
        let kept = store.addTask(forKey: "save", duplicateKeyBehavior: .preferPrevious) { log.record("never") }
        store.addTask(forKey: "search") { await TestGate().waitOrCancel(); log.record("stale search \(Task.isCancelled)") }
        store.addTask(forKey: "search", duplicateKeyBehavior: .cancelPrevious(wait: false)) { log.record("search") }
        store.addTask(forKey: "log", duplicateKeyBehavior: .runConcurrently) { await gate.wait() }
        store.addTask(forKey: "log", duplicateKeyBehavior: .runConcurrently) { await gate.wait() }
        #expect(store.runningTaskKeys.isSuperset(of: ["save", "log"]))
        gate.open()
        try await kept.boundedValue()
        await store.currentTask(forKey: "log")?.value
        await log.waitForEvents(count: 4)
        #expect(Set(log.events) == ["first save", "second save", "stale search true", "search"])
        #expect(TaskStoreDuplicateKeyBehavior.cancelPrevious(wait: true).waitForPrevious)
        #expect(TaskStoreDuplicateKeyBehavior.preferPrevious.preferPrevious)
        #expect(!TaskStoreDuplicateKeyBehavior.preferPrevious.runNewTask)
        #expect(TaskStoreDuplicateKeyBehavior.wait.cancelPrevious == false)
    }

    @available(*, deprecated, message: "exercises the TaskStore package's runningTaskKeys, kept as a deprecated alias")
    @Test func runningTaskCountAndKeys() async throws {
        let store = TaskStore<Int>()
        let gate = TestGate()
        let a = store.addTask(forKey: 1) { await gate.wait() }
        let b = store.addTask(forKey: 1, duplicateKeyBehavior: .runConcurrently) { await gate.wait() }
        #expect(store.runningTaskCount == 2)
        #expect(store.runningTaskKeys == [1])
        gate.open()
        try await a.boundedValue()
        try await b.boundedValue()
        #expect(store.runningTaskCount == 0)
    }

    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    @Test func addImmediateTask() async throws {
        let store = TaskStore<Int>()
        let log = Recorder()
        let task = store.addImmediateTask(forKey: 1) { log.record("ran synchronously") }
        #expect(log.events == ["ran synchronously"])
        try await task.boundedValue()
    }

    @Test nonisolated func aStoreInANonisolatedContext() async {
        let store = TaskStore<Int>()
        await store.addTask(forKey: 1) {}.value
        #expect(!store.taskIsRunning(forKey: 1))
    }
}
