import Testing
import TaskKit
import TaskKitTestSupport

/// The five duplicate-key behaviours, identity, cancellation and the value-returning overload,
/// on the main actor (the SwiftUI case). Ordering is forced with gates, never with sleeps.
@MainActor
@Suite struct TaskStoreBehaviourTests {
    let store = TaskStore<String>()
    let log = Recorder()

    /// An operation that logs its start, waits for `gate` (ignoring cancellation), then logs its
    /// end and whether it was cancelled.
    func op(_ name: String, _ gate: TestGate) -> @Sendable () async -> Void {
        { [log] in
            log.record("\(name) start")
            await gate.wait()
            log.record("\(name) end\(Task.isCancelled ? " cancelled" : "")")
        }
    }

    @Test func cancelPreviousWithoutWaitingCancelsAndStartsImmediately() async throws {
        let gateA = TestGate(), gateB = TestGate()
        let a = store.addTask(forKey: "k", operation: op("A", gateA))
        await log.waitForEvents(count: 1)
        let b = store.addTask(forKey: "k", operation: op("B", gateB))  // default behaviour
        #expect(a.isCancelled)
        await log.waitForEvents(count: 2)
        #expect(log.events == ["A start", "B start"], "B starts while A is still running")
        gateA.open()
        try await a.boundedValue()
        #expect(store.taskIsRunning(forKey: "k"), "the finished old task must not remove the newer one")
        #expect(store.runningKeys == ["k"])
        gateB.open()
        try await b.boundedValue()
        #expect(!store.taskIsRunning(forKey: "k"))
        #expect(log.events == ["A start", "B start", "A end cancelled", "B end"])
    }

    @Test func cancelPreviousAndWaitStartsOnlyAfterTheCancelledTaskFinished() async throws {
        let gateA = TestGate(), gateB = TestGate()
        let a = store.addTask(forKey: "k", operation: op("A", gateA))
        await log.waitForEvents(count: 1)
        let b = store.addTask(forKey: "k", duplicateKeyBehavior: .cancelPrevious(wait: true), operation: op("B", gateB))
        #expect(a.isCancelled)
        await yieldALot()
        #expect(log.events == ["A start"], "B must not start before A finished")
        gateA.open()
        await log.waitForEvents(count: 3)
        #expect(store.taskIsRunning(forKey: "k"))
        gateB.open()
        try await b.boundedValue()
        #expect(log.events == ["A start", "A end cancelled", "B start", "B end"])
        #expect(!store.taskIsRunning(forKey: "k"))
    }

    @Test func waitLetsThePreviousTaskFinishUncancelledThenRuns() async throws {
        let gateA = TestGate(), gateB = TestGate()
        let a = store.addTask(forKey: "k", operation: op("A", gateA))
        await log.waitForEvents(count: 1)
        let b = store.addTask(forKey: "k", duplicateKeyBehavior: .wait, operation: op("B", gateB))
        #expect(!a.isCancelled)
        await yieldALot()
        #expect(log.events == ["A start"])
        gateA.open()
        try await a.boundedValue()
        #expect(store.taskIsRunning(forKey: "k"))
        gateB.open()
        try await b.boundedValue()
        #expect(log.events == ["A start", "A end", "B start", "B end"])
        #expect(!store.taskIsRunning(forKey: "k"))
    }

    @Test func runConcurrentlyRunsBothAndTracksBoth() async throws {
        let gateA = TestGate(), gateB = TestGate()
        let a = store.addTask(forKey: "k", operation: op("A", gateA))
        let b = store.addTask(forKey: "k", duplicateKeyBehavior: .runConcurrently, operation: op("B", gateB))
        await log.waitForEvents(count: 2)
        #expect(Set(log.events) == ["A start", "B start"])
        #expect(!a.isCancelled)
        gateB.open()
        try await b.boundedValue()
        #expect(store.taskIsRunning(forKey: "k"), "A still runs under the key")
        gateA.open()
        try await a.boundedValue()
        #expect(!store.taskIsRunning(forKey: "k"))
        #expect(log.events.filter { $0.hasSuffix("end") }.sorted() == ["A end", "B end"])
    }

    @Test func runConcurrentlyCancelTaskCancelsEveryTaskUnderTheKey() async throws {
        let gate = TestGate()
        let tasks = (0..<5).map { i in
            store.addTask(forKey: "k", duplicateKeyBehavior: .runConcurrently) { [log] in
                await gate.waitOrCancel()
                log.record("\(i) \(Task.isCancelled)")
            }
        }
        let other = store.addTask(forKey: "other") { await gate.wait() }
        store.cancelTask(forKey: "k")
        for task in tasks { await task.value }
        #expect(log.events.allSatisfy { $0.hasSuffix("true") } && log.events.count == 5)
        #expect(!store.taskIsRunning(forKey: "k"))
        #expect(store.taskIsRunning(forKey: "other") && !other.isCancelled)
        gate.open()
        try await other.boundedValue()
    }

    @Test func preferPreviousKeepsTheRunningTaskAndStartsNothing() async throws {
        let gateA = TestGate()
        let a = store.addTask(forKey: "k", operation: op("A", gateA))
        let b = store.addTask(forKey: "k", duplicateKeyBehavior: .preferPrevious, operation: op("B", TestGate()))
        #expect(a == b)
        #expect(!a.isCancelled)
        gateA.open()
        try await a.boundedValue()
        await yieldALot()
        #expect(log.events == ["A start", "A end"])
        // With nothing running, .preferPrevious starts the new work.
        let c = store.addTask(forKey: "k", duplicateKeyBehavior: .preferPrevious) { [log] in log.record("C") }
        try await c.boundedValue()
        #expect(log.events.last == "C")
    }

    @Test(arguments: [TaskStoreDuplicateKeyBehavior.wait, .cancelPrevious(wait: true)])
    func cancellingTheWaitingTaskCancelsThePreviousOne(behavior: TaskStoreDuplicateKeyBehavior) async throws {
        let a = store.addTask(forKey: "k") { [log] in
            log.record("A start")
            await TestGate().waitOrCancel()  // ends only through cancellation
            log.record("A end \(Task.isCancelled)")
        }
        await log.waitForEvents(count: 1)
        let b = store.addTask(forKey: "k", duplicateKeyBehavior: behavior) { [log] in
            log.record("B \(Task.isCancelled)")
        }
        b.cancel()
        try await b.boundedValue()
        #expect(a.isCancelled)
        #expect(log.events == ["A start", "A end true", "B true"])
        #expect(!store.taskIsRunning(forKey: "k"))
    }

    @Test func aChainOfWaitingTasksIsCancelledThroughTheChain() async throws {
        let a = store.addTask(forKey: "k") { await TestGate().waitOrCancel() }
        let b = store.addTask(forKey: "k", duplicateKeyBehavior: .wait) {}
        let c = store.addTask(forKey: "k", duplicateKeyBehavior: .wait) {}
        store.cancelTask(forKey: "k")  // only c is tracked now
        try await c.boundedValue()
        #expect(a.isCancelled && b.isCancelled && c.isCancelled)
        #expect(!store.taskIsRunning(forKey: "k"))
    }

    @Test(arguments: [
        TaskStoreDuplicateKeyBehavior.cancelPrevious(wait: false), .cancelPrevious(wait: true), .wait,
        .runConcurrently, .preferPrevious,
    ])
    func aCancelRightAfterAddTaskAlwaysWins(behavior: TaskStoreDuplicateKeyBehavior) async throws {
        // Without a previous task.
        let first = store.addTask(forKey: "k", duplicateKeyBehavior: behavior) { [log] in
            log.record("first \(Task.isCancelled)")
        }
        store.cancelTask(forKey: "k")
        try await first.boundedValue()
        #expect(log.events == ["first true"])
        // With a previous task running, through the returned task.
        let gate = TestGate()
        let previous = store.addTask(forKey: "k") { await gate.waitOrCancel() }
        let second = store.addTask(forKey: "k", duplicateKeyBehavior: behavior) { [log] in
            log.record("second \(Task.isCancelled)")
        }
        second.cancel()
        gate.open()
        try await previous.boundedValue()
        try await second.boundedValue()
        if behavior.runsNewTask {
            #expect(log.events == ["first true", "second true"])
        } else {
            #expect(second == previous, "preferPrevious returned the running task, which the cancel hit")
        }
    }

    @Test func cancelAllTasksCancelsEveryKey() async {
        let tasks = (0..<10).map { i in store.addTask(forKey: "\(i)") { await TestGate().waitOrCancel() } }
        #expect(store.runningKeys.count == 10)
        store.cancelAllTasks()
        for task in tasks { await task.value }
        #expect(tasks.allSatisfy { $0.isCancelled })
        #expect(store.runningKeys.isEmpty)
    }

    @Test func cancellingAnIdleKeyDoesNothing() {
        store.cancelTask(forKey: "nothing")
        store.cancelAllTasks()
        #expect(store.runningKeys.isEmpty)
    }

    // MARK: - Value-returning overload

    @Test func theThrowingOverloadReturnsValuesAndErrors() async throws {
        struct Boom: Error {}
        let value = store.addTask(forKey: "v") { 42 }
        #expect(try await value.boundedValue() == 42)
        let failing = store.addTask(forKey: "e") { () async throws -> Int in throw Boom() }
        await #expect(throws: Boom.self) { try await failing.boundedValue() }
        #expect(store.runningKeys.isEmpty, "a task that throws is removed like any other")
    }

    @Test func theThrowingOverloadFollowsTheBehaviours() async throws {
        let gate = TestGate()
        let a = store.addTask(forKey: "k") { () async throws -> Int in
            await gate.waitOrCancel()
            try Task.checkCancellation()
            return 1
        }
        let kept = store.addTask(forKey: "k", duplicateKeyBehavior: .preferPrevious) { () async throws -> Int in 2 }
        #expect(kept == a)
        let b = store.addTask(forKey: "k", duplicateKeyBehavior: .cancelPrevious(wait: true)) { () async throws -> Int in 3 }
        await #expect(throws: CancellationError.self) { try await a.boundedValue() }
        #expect(try await b.boundedValue() == 3)
        #expect(!store.taskIsRunning(forKey: "k"))
    }

    @Test func voidPreferPreviousOverATypedTaskReturnsAWrapperThatForwardsCancellation() async throws {
        let a = store.addTask(forKey: "k") { () async throws -> Int in
            await TestGate().waitOrCancel()
            return 1
        }
        let wrapper = store.addTask(forKey: "k", duplicateKeyBehavior: .preferPrevious) {}
        wrapper.cancel()
        try await wrapper.boundedValue()
        #expect(a.isCancelled)
        #expect(!store.taskIsRunning(forKey: "k"))
    }
}
