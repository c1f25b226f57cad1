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

    @Test func preferPreviousOverATaskOfAnotherResultTypeTraps() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let store = TaskStore<Int>()
                store.addTask(forKey: 1) {}  // Task<Void, Never>, not yet finished
                store.addTask(forKey: 1, duplicateKeyBehavior: .preferPrevious) { () async throws -> Int in 1 }
            }
        }
        #expect(result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) }?.contains("use one result type per key with .preferPrevious") == true)
    }

    @Test func preferPreviousOverATaskOfAnotherSuccessTypeTrapsNamingBothTypes() async {
        let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let store = TaskStore<Int>()
                store.addTask(forKey: 1) { () async throws -> String in "running" }
                store.addTask(forKey: 1, duplicateKeyBehavior: .preferPrevious) { () async throws -> Int in 1 }
            }
        }
        let stderr = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
        #expect(stderr.contains("is running a Task<String, "))
        #expect(stderr.contains("cannot be returned as Task<Int, "))
    }
}

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
