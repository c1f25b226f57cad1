import Testing
import TaskKitTestSupport
import TaskKit

/// Counts operations and, per key, how many run at the same moment.
final class StressProbe: Sendable {
    private struct State {
        var active: [Int: Int] = [:]
        var maxActive = 0
        var runs = 0
    }

    private let state = LockedState.make(State())

    func enter(_ key: Int) {
        state.withLock { state in
            state.runs += 1
            state.active[key, default: 0] += 1
            state.maxActive = max(state.maxActive, state.active[key]!)
        }
    }

    func exit(_ key: Int) {
        state.withLock { $0.active[key]! -= 1 }
    }

    var runs: Int { state.withLock { $0.runs } }
    var maxActivePerKey: Int { state.withLock { $0.maxActive } }
}

/// The main-actor counterpart of `StoreOwner`.
@MainActor
final class MainStoreOwner: Sendable {
    let store = TaskStore<Int>()

    func add(
        _ key: Int, _ behavior: TaskStoreDuplicateKeyBehavior, operation: @escaping @Sendable () async -> Void
    ) -> Task<Void, Never> {
        store.addTask(forKey: key, duplicateKeyBehavior: behavior, operation: operation)
    }

    func cancel(_ key: Int) { store.cancelTask(forKey: key) }
    func isRunning(_ key: Int) -> Bool { store.taskIsRunning(forKey: key) }
    var runningKeys: Set<Int> { store.runningKeys }
}

/// One store driven through its actor by many concurrent callers.
struct StressTarget: Sendable, CustomTestStringConvertible {
    var name: String
    var add: @Sendable (Int, TaskStoreDuplicateKeyBehavior, @escaping @Sendable () async -> Void) async -> (Task<Void, Never>, Bool)
    var cancel: @Sendable (Int) async -> Void
    var runningKeys: @Sendable () async -> Set<Int>

    var testDescription: String { name }

    @MainActor
    static func mainActor() -> StressTarget {
        let owner = MainStoreOwner()
        return StressTarget(
            name: "main actor",
            add: { key, behavior, operation in
                await MainActor.run {
                    let task = owner.add(key, behavior, operation: operation)
                    return (task, owner.isRunning(key))
                }
            },
            cancel: { key in await owner.cancel(key) },
            runningKeys: { await owner.runningKeys }
        )
    }

    static func customActor() -> StressTarget {
        let owner = StoreOwner()
        return StressTarget(
            name: "custom actor",
            add: { key, behavior, operation in await owner.addAndCheck(key, behavior, operation) },
            cancel: { key in await owner.cancel(key) },
            runningKeys: { await owner.runningKeys }
        )
    }
}

extension StoreOwner {
    func addAndCheck(
        _ key: Int, _ behavior: TaskStoreDuplicateKeyBehavior, _ operation: @escaping @Sendable () async -> Void
    ) -> (Task<Void, Never>, Bool) {
        let task = store.addTask(forKey: key, duplicateKeyBehavior: behavior, operation: operation)
        return (task, store.taskIsRunning(forKey: key))
    }
}

/// Thousands of keys, rapid duplicate adds from concurrent callers, under every behaviour.
@Suite struct TaskStoreStressTests {
    static let behaviours: [TaskStoreDuplicateKeyBehavior] = [
        .cancelPrevious(wait: false), .cancelPrevious(wait: true), .wait, .runConcurrently, .preferPrevious,
    ]
    static let keys = 2_000
    static let callers = 8
    static let addsPerKey = 4

    @MainActor
    static func targets() -> [StressTarget] { [.mainActor(), .customActor()] }

    /// Every caller adds `addsPerKey` times to each of its keys (keys are shared between two
    /// callers, so duplicates come from different tasks too), then everything is awaited.
    static func hammer(
        _ target: StressTarget, behaviour: @escaping @Sendable (Int) -> TaskStoreDuplicateKeyBehavior,
        cancelEvery: Int? = nil, probe: StressProbe
    ) async -> (tasks: [Task<Void, Never>], alwaysRunningAfterAdd: Bool) {
        await withTaskGroup(of: ([Task<Void, Never>], Bool).self) { group in
            for caller in 0..<callers {
                group.addTask {
                    var tasks: [Task<Void, Never>] = []
                    var running = true
                    for round in 0..<addsPerKey {
                        for key in stride(from: caller / 2, to: keys, by: callers / 2) {
                            let (task, isRunning) = await target.add(key, behaviour(round + key)) {
                                probe.enter(key)
                                await Task.yield()
                                probe.exit(key)
                            }
                            tasks.append(task)
                            running = running && isRunning
                            if let cancelEvery, (key + round) % cancelEvery == 0 { await target.cancel(key) }
                        }
                    }
                    return (tasks, running)
                }
            }
            var all: [Task<Void, Never>] = []
            var running = true
            for await (tasks, isRunning) in group {
                all += tasks
                running = running && isRunning
            }
            return (all, running)
        }
    }

    @Test(arguments: Self.behaviours)
    func rapidDuplicateAddsUnderOneBehaviour(behavior: TaskStoreDuplicateKeyBehavior) async throws {
        for target in await Self.targets() {
            let probe = StressProbe()
            let (tasks, runningAfterAdd) = await Self.hammer(target, behaviour: { _ in behavior }, probe: probe)
            for task in tasks { try await task.boundedValue() }
            #expect(runningAfterAdd, "\(target.name): a key reads as running right after addTask")
            #expect(await target.runningKeys().isEmpty, "\(target.name): every key stops once its tasks finished")
            // Each distinct returned task ran its operation exactly once.
            #expect(probe.runs == Set(tasks).count, "\(target.name)")
            if behavior.runsNewTask {
                #expect(Set(tasks).count == tasks.count, "\(target.name): every add started new work")
            }
            if behavior.waitsForPrevious && behavior.runsNewTask {
                #expect(probe.maxActivePerKey == 1, "\(target.name): waiting behaviours never overlap under a key")
            }
        }
    }

    @Test func mixedBehavioursWithCancellations() async throws {
        for target in await Self.targets() {
            let probe = StressProbe()
            let (tasks, runningAfterAdd) = await Self.hammer(
                target, behaviour: { Self.behaviours[$0 % Self.behaviours.count] }, cancelEvery: 7, probe: probe
            )
            for task in tasks { try await task.boundedValue() }
            #expect(runningAfterAdd, "\(target.name)")
            #expect(await target.runningKeys().isEmpty, "\(target.name)")
            #expect(probe.runs == Set(tasks).count, "\(target.name)")
        }
    }

    @Test func cancelRightAfterAddWinsUnderLoad() async {
        let owner = StoreOwner()
        let results = await withTaskGroup(of: Bool.self) { group in
            for key in 0..<2_000 {
                group.addTask { await owner.addAndCancelImmediately(key % 50).value }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0 } && results.count == 2_000)
        #expect(await owner.runningKeys.isEmpty)
    }
}
