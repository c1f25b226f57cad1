import Testing
@testable import TaskKit

/// Pure rules of the bookkeeping, without any task or thread. Handles are plain strings.
@Suite struct TaskStoreStateMachineTests {
    typealias Machine = TaskStoreStateMachine<String, String>

    /// Adds `handle` under `key`, asserting the machine decided to start it; returns its id.
    @discardableResult
    func start(_ machine: inout Machine, _ key: String, _ handle: String, _ behavior: TaskStoreDuplicateKeyBehavior) -> UInt64 {
        switch machine.prepareAdd(key: key, behavior: behavior) {
        case .startFirst(let id):
            machine.commitFirst(key: key, id: id, handle: handle)
            return id
        case .startNew(let id, _, _, _):
            machine.commitAdd(key: key, id: id, handle: handle, behavior: behavior)
            return id
        case .keepPrevious:
            Issue.record("expected .startFirst or .startNew")
            return 0
        }
    }

    @Test(arguments: [
        TaskStoreDuplicateKeyBehavior.cancelPrevious(wait: false), .cancelPrevious(wait: true), .wait,
        .runConcurrently, .preferPrevious,
    ])
    func anIdleKeyAlwaysStartsWithoutPrevious(behavior: TaskStoreDuplicateKeyBehavior) {
        var machine = Machine()
        guard case .startFirst(let id) = machine.prepareAdd(key: "k", behavior: behavior) else {
            Issue.record("expected .startFirst")
            return
        }
        #expect(!machine.isRunning("k"), "nothing is recorded before the commit")
        machine.commitFirst(key: "k", id: id, handle: "A")
        #expect(machine.isRunning("k"))
        #expect(machine.tasks(forKey: "k")?.handles == ["A"])
    }

    @Test func decisionsForARunningKeyFollowTheBehaviour() {
        var machine = Machine()
        start(&machine, "k", "A", .wait)
        func decide(_ behavior: TaskStoreDuplicateKeyBehavior) -> (cancel: Bool, wait: Bool, previous: [String])? {
            guard case .startNew(_, let previous, let cancel, let wait) = machine.prepareAdd(key: "k", behavior: behavior)
            else { return nil }
            return (cancel, wait, previous.handles)
        }
        #expect(decide(.cancelPrevious(wait: false)).map { [$0.cancel, $0.wait] } == [true, false])
        #expect(decide(.cancelPrevious(wait: true)).map { [$0.cancel, $0.wait] } == [true, true])
        #expect(decide(.wait).map { [$0.cancel, $0.wait] } == [false, true])
        #expect(decide(.runConcurrently).map { [$0.cancel, $0.wait] } == [false, false])
        #expect(decide(.wait)?.previous == ["A"])
        guard case .keepPrevious(let kept) = machine.prepareAdd(key: "k", behavior: .preferPrevious) else {
            Issue.record("expected .keepPrevious")
            return
        }
        #expect(kept == "A")
    }

    @Test func identitiesAreUniqueAndIncreasing() {
        var machine = Machine()
        let a = start(&machine, "k", "A", .runConcurrently)
        let b = start(&machine, "k", "B", .runConcurrently)
        let c = start(&machine, "other", "C", .runConcurrently)
        #expect(a < b && b < c)
    }

    @Test(arguments: [TaskStoreDuplicateKeyBehavior.cancelPrevious(wait: false), .cancelPrevious(wait: true), .wait])
    func aReplacedTaskFinishingNeverRemovesItsReplacement(behavior: TaskStoreDuplicateKeyBehavior) {
        var machine = Machine()
        let a = start(&machine, "k", "A", behavior)
        let b = start(&machine, "k", "B", behavior)
        #expect(machine.tasks(forKey: "k")?.handles == ["B"])
        #expect(machine.finish(key: "k", id: a) == .none)
        #expect(machine.isRunning("k"))
        #expect(machine.finish(key: "k", id: b) == .stopKey)
        #expect(machine.isRunning("k"), "the entry stays until the store removes it inside its mutation")
        #expect(machine.removeFinished(key: "k", id: b) == "k")
        #expect(!machine.isRunning("k"))
    }

    @Test func aFirstCommitAfterAReentrantAddKeepsBothTasks() {
        var machine = Machine()
        guard case .startFirst(let outer) = machine.prepareAdd(key: "k", behavior: .cancelPrevious(wait: false)) else {
            Issue.record("expected .startFirst")
            return
        }
        // Re-entrant add under the same key before the outer commit (an observer's handler).
        start(&machine, "k", "inner", .cancelPrevious(wait: false))
        machine.commitFirst(key: "k", id: outer, handle: "outer")
        #expect(machine.tasks(forKey: "k")?.handles.sorted() == ["inner", "outer"])
    }

    @Test func finishingCanRemoveAStoppedKeyInTheSameStep() {
        var machine = Machine()
        let a = start(&machine, "k", "A", .runConcurrently)
        let b = start(&machine, "k", "B", .runConcurrently)
        #expect(machine.removeFinished(key: "k", id: b) == nil)
        #expect(machine.tasks(forKey: "k")?.handles == ["A"], "a key that keeps running keeps its entry")
        #expect(machine.removeFinished(key: "k", id: a) == "k", "the removed key is handed out")
        #expect(!machine.isRunning("k"))
    }

    @Test(arguments: [TaskStoreDuplicateKeyBehavior.cancelPrevious(wait: false), .wait, .runConcurrently])
    func aKeyThatGainsATaskBetweenStoppingAndRemovalKeepsIt(behavior: TaskStoreDuplicateKeyBehavior) {
        // An observer's `willSet` handler, which runs between `finish` and `removeFinished`,
        // adds a task under the stopping key.
        var machine = Machine()
        let a = start(&machine, "k", "A", .wait)
        #expect(machine.finish(key: "k", id: a) == .stopKey)
        start(&machine, "k", "B", behavior)
        #expect(machine.removeFinished(key: "k", id: a) == nil)
        #expect(machine.tasks(forKey: "k")?.handles == ["B"])
    }

    @Test func runConcurrentlyTracksEveryTaskUntilTheLastFinishes() {
        var machine = Machine()
        let a = start(&machine, "k", "A", .runConcurrently)
        let b = start(&machine, "k", "B", .runConcurrently)
        let c = start(&machine, "k", "C", .runConcurrently)
        #expect(machine.tasks(forKey: "k")?.handles == ["A", "B", "C"])
        #expect(machine.finish(key: "k", id: c) == .none)
        #expect(machine.tasks(forKey: "k")?.handles.sorted() == ["A", "B"])
        #expect(machine.finish(key: "k", id: a) == .none)
        #expect(machine.tasks(forKey: "k")?.handles == ["B"])
        #expect(machine.finish(key: "k", id: b) == .stopKey)
    }

    @Test func preferPreviousReturnsTheNewestOfConcurrentTasks() {
        var machine = Machine()
        start(&machine, "k", "A", .runConcurrently)
        start(&machine, "k", "B", .runConcurrently)
        guard case .keepPrevious(let kept) = machine.prepareAdd(key: "k", behavior: .preferPrevious) else {
            Issue.record("expected .keepPrevious")
            return
        }
        #expect(kept == "B")
    }

    @Test func aReplacingAddAfterConcurrentAddsTakesOverAllOfThem() {
        var machine = Machine()
        start(&machine, "k", "A", .runConcurrently)
        start(&machine, "k", "B", .runConcurrently)
        guard case .startNew(let id, let previous, _, _) = machine.prepareAdd(key: "k", behavior: .wait) else {
            Issue.record("expected .startNew")
            return
        }
        #expect(previous.handles == ["A", "B"], "the new task waits for (or cancels) every tracked task")
        machine.commitAdd(key: "k", id: id, handle: "C", behavior: .wait)
        #expect(machine.tasks(forKey: "k")?.handles == ["C"])
    }

    @Test func finishingAnUnknownKeyOrIdentityIsIgnored() {
        var machine = Machine()
        #expect(machine.finish(key: "nope", id: 1) == .none)
        let a = start(&machine, "k", "A", .wait)
        #expect(machine.finish(key: "k", id: a + 100) == .none)
        #expect(machine.isRunning("k"))
    }

    @Test func keysAreIndependent() {
        var machine = Machine()
        let a = start(&machine, "a", "A", .cancelPrevious(wait: false))
        start(&machine, "b", "B", .cancelPrevious(wait: false))
        #expect(machine.finish(key: "a", id: a) == .stopKey)
        #expect(machine.removeFinished(key: "a", id: a) != nil)
        #expect(Set(machine.entries.keys) == ["b"])
    }
}

@Suite struct TaskStoreDuplicateKeyBehaviorTests {
    @Test func readOutsMatchTheBehaviours() {
        typealias B = TaskStoreDuplicateKeyBehavior
        // (prefersPrevious, cancelsPrevious, waitsForPrevious, runsNewTask)
        func readOut(_ b: B) -> [Bool] { [b.prefersPrevious, b.cancelsPrevious, b.waitsForPrevious, b.runsNewTask] }
        #expect(readOut(.cancelPrevious(wait: false)) == [false, true, false, true])
        #expect(readOut(.cancelPrevious(wait: true)) == [false, true, true, true])
        #expect(readOut(.wait) == [false, false, true, true])
        #expect(readOut(.runConcurrently) == [false, false, false, true])
        #expect(readOut(.preferPrevious) == [true, false, true, false])
    }

    @Test func behavioursAreDistinctHashableValuesWithReadableDescriptions() {
        let all: [TaskStoreDuplicateKeyBehavior] = [
            .cancelPrevious(wait: false), .cancelPrevious(wait: true), .wait, .runConcurrently, .preferPrevious,
        ]
        #expect(Set(all).count == 5)
        #expect(all.map(\.description) == [
            ".cancelPrevious(wait: false)", ".cancelPrevious(wait: true)", ".wait", ".runConcurrently", ".preferPrevious",
        ])
    }
}
