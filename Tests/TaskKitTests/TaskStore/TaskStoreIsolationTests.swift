import Testing
import TaskKit
import TaskKitTestSupport

/// A stand-in for "some other actor" in the misuse tests.
actor OtherActor {
    func add(_ box: UncheckedBox<TaskStore<Int>>) {
        box.value.addTask(forKey: 1) {}
    }

    func cancelAll(_ box: UncheckedBox<TaskStore<Int>>) {
        box.value.cancelAllTasks()
    }
}

/// The store on a custom actor, and the run-time checks that make misuse trap instead of race.
@Suite struct TaskStoreIsolationTests {
    @Test func behavioursWorkOnACustomActor() async {
        let owner = StoreOwner()
        let log = Recorder()
        let gateA = TestGate(), gateB = TestGate()
        let a = await owner.add(1) { [log] in
            log.record("A start")
            await gateA.wait()
            log.record("A end \(Task.isCancelled)")
        }
        await log.waitForEvents(count: 1)
        let b = await owner.add(1, .wait) { [log] in
            log.record("B start")
            await gateB.wait()
        }
        #expect(await owner.isRunning(1))
        gateA.open()
        await a.value
        #expect(await owner.isRunning(1), "A finishing must not remove B")
        gateB.open()
        await b.value
        #expect(await owner.runningKeys.isEmpty)
        #expect(log.events == ["A start", "A end false", "B start"])
    }

    @Test func aCancelRightAfterAddTaskWinsOnACustomActor() async {
        let owner = StoreOwner()
        let sawCancellation = await owner.addAndCancelImmediately(1)
        #expect(await sawCancellation.value)
    }

    @Test func aStoreOwnedByOneActorWorksAcrossManyCallsAndStoresAreIndependent() async {
        let first = StoreOwner(), second = StoreOwner()
        for i in 0..<100 {
            await first.add(i) {}.value
            await second.add(i) {}.value
        }
        let firstKeys = await first.runningKeys, secondKeys = await second.runningKeys
        #expect(firstKeys.isEmpty && secondKeys.isEmpty)
    }

    @Test func usingAStoreFromASecondActorTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let box = UncheckedBox(TaskStore<Int>())
            let first = OtherActor(), second = OtherActor()  // both alive, so distinct
            await first.add(box)
            await second.cancelAll(box)
            withExtendedLifetime(first) {}
        }
        #expect(result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) }?.contains("but this store belongs to another actor") == true)
    }

    @Test func readingAStoreOffItsActorTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let box = UncheckedBox(TaskStore<Int>())
            let owner = OtherActor()
            await owner.add(box)
            // This nonisolated async function runs on the global executor, not on the owner.
            // (The owner must be alive: the store holds it weakly, and a dead owner cannot race.)
            _ = box.value.taskIsRunning(forKey: 1)
            withExtendedLifetime(owner) {}
        }
        // `Actor.preconditionIsolated` prints the runtime's own message on Linux, ours on Apple.
        let stderr = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
        #expect(
            stderr.contains("taskIsRunning(forKey:) called off the executor")
                || stderr.contains("Incorrect actor executor assumption; expected 'TaskKitTests.OtherActor' executor")
        )
    }

    @MainActor
    @Test func preferPreviousOverATaskOfAnotherResultTypeFailsWithATypedError() async throws {
        let store = TaskStore<Int>()
        let gate = TestGate()
        let running = store.addTask(forKey: 1) { await gate.wait() }  // Task<Void, Never>
        let kept = store.addTask(forKey: 1, duplicateKeyBehavior: .preferPrevious) { () async throws -> Int in 1 }
        let error = await #expect(throws: TaskStoreResultTypeMismatch.self) { try await kept.value }
        #expect(error?.key == "1")
        #expect(error?.runningTaskType.hasPrefix("Task<(), Never>") == true)
        #expect(error?.requestedTaskType.hasPrefix("Task<Int, ") == true)
        #expect(error?.description.contains("use one result type per key with .preferPrevious") == true)
        // The running task was kept, untouched.
        #expect(store.taskIsRunning(forKey: 1))
        #expect(!running.isCancelled)
        gate.open()
        await running.value
    }

    @MainActor
    @Test func preferPreviousOverATaskOfAnotherSuccessTypeNamesBothTypes() async throws {
        let store = TaskStore<Int>()
        let gate = TestGate()
        let running = store.addTask(forKey: 1) { () async throws -> String in
            await gate.wait()
            return "running"
        }
        let kept = store.addTask(forKey: 1, duplicateKeyBehavior: .preferPrevious) { () async throws -> Int in 1 }
        let error = await #expect(throws: TaskStoreResultTypeMismatch.self) { try await kept.value }
        #expect(error?.runningTaskType.hasPrefix("Task<String, ") == true)
        #expect(error?.requestedTaskType.hasPrefix("Task<Int, ") == true)
        gate.open()
        #expect(try await running.value == "running")
    }

    /// Adding `try` to a `Void` operation selects the value-returning `addTask`: under
    /// `.preferPrevious` it still keeps whatever runs under the key, as the `Void` form does.
    @MainActor
    @Test func preferPreviousWithAThrowingVoidOperationWaitsForTheRunningTask() async throws {
        let store = TaskStore<Int>()
        let gate = TestGate()
        let recorder = Recorder()
        store.addTask(forKey: 1) {
            await gate.wait()
            recorder.record("running task")
        }
        let kept = store.addTask(forKey: 1, duplicateKeyBehavior: .preferPrevious) { () async throws in
            recorder.record("new task")  // never runs: the running task is kept
        }
        gate.open()
        try await kept.value
        #expect(recorder.events == ["running task"])
        // Cancelling the returned task cancels the running one, as the `Void` form's wrapper does.
        let slow = TestGate()
        store.addTask(forKey: 2) {
            await slow.waitOrCancel()
            recorder.record("cancelled: \(Task.isCancelled)")
        }
        let waiting = store.addTask(forKey: 2, duplicateKeyBehavior: .preferPrevious) { () async throws in }
        waiting.cancel()
        try await waiting.value
        #expect(recorder.events == ["running task", "cancelled: true"])
    }}

extension StoreOwner {
    /// Adds a task and cancels it by key in the same actor turn; the task reports what its
    /// operation saw at its first check.
    func addAndCancelImmediately(_ key: Int) -> Task<Bool, Never> {
        let seen = Recorder()
        let task = store.addTask(forKey: key) { seen.record("\(Task.isCancelled)") }
        store.cancelTask(forKey: key)
        return Task {
            await task.value
            return seen.events == ["true"]
        }
    }
}
