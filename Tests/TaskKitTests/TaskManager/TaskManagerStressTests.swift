import Dispatch
import Testing
@testable import TaskKit
import TaskKitTestSupport
import TaskKitTesting

/// Thousands of tasks mixing every way a task can end, with and without a concurrency limit.
/// Each task's completion must arrive exactly once, with an outcome its kind allows, and the
/// manager must end idle.
@Suite struct TaskManagerStressTests {
    /// What a stress task does, by `index % 7`.
    enum Kind: Int, CaseIterable {
        case succeeds, cancelledRightAway, timesOut, heldThenCancelled, discarded, requeuedOnce, failsAndJoins
    }

    static let count = 3_500

    @Test(arguments: [nil, 16] as [Int?])
    func thousandsOfTasksEachCompleteExactlyOnce(maximumConcurrentTasks: Int?) async throws {
        let clock = ManualClock()
        // The first interceptor holds "heldThenCancelled" (and never releases its batch: it never
        // answers execute), discards "discarded", and holds the rest, which the second forces.
        let holder = TaskManagerTestInterceptor { name, _ in name == "discarded" ? .discard : .hold }
        let forcer = TaskManagerTestInterceptor { name, _ in
            name == "heldThenCancelled" || name == "discarded" ? .execute : .forceExecute
        }
        // Reactor 0 requeues a task whose first run failed with code 1; reactor 1 watches
        // failures with code 2 (they join its runs) and lets their result through.
        let requeuer = TaskManagerTestReactor(ReactorConfiguration(requeuesTask: true)) { result, _ in
            if case .failure(let error as TaskManagerTestError) = result { return error.code == 1 }
            return false
        } work: { _ in
            await Task.yield()
        }
        let watcher = TaskManagerTestReactor(ReactorConfiguration(suspendsTaskQueue: true)) { result, _ in
            if case .failure(let error as TaskManagerTestError) = result { return error.code == 2 }
            return false
        } work: { _ in
            for _ in 0..<3 { await Task.yield() }
        }
        let manager = TaskManager(
            interceptors: [holder, forcer], reactors: [requeuer, watcher],
            maximumConcurrentTasks: maximumConcurrentTasks, clock: clock
        )
        let done = TaskManagerTestCompletions<Int>()
        let handles = LockedState<[Int: TaskHandle]>([:])
        let forever = Duration.seconds(1_000_000_000)

        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<4 {
                group.addTask {
                    for index in stride(from: worker, to: Self.count, by: 4) {
                        let kind = Kind(rawValue: index % Kind.allCases.count)!
                        let task = TaskManagerTestTask<Int>("\(kind)") { task in
                            switch kind {
                            case .timesOut:
                                try await clock.sleep(for: forever)
                            case .requeuedOnce where task.executions.count == 1:
                                throw TaskManagerTestError(code: 1)
                            case .failsAndJoins:
                                throw TaskManagerTestError(code: 2)
                            default:
                                await Task.yield()
                            }
                            return index
                        }
                        let handle = manager.add(
                            task: task, timeout: kind == .timesOut ? .seconds(1) : nil, completion: done.callback(index)
                        )
                        if kind == .cancelledRightAway { handle.cancel() }
                        if kind == .heldThenCancelled { handles.withLock { $0[index] = handle } }
                    }
                }
            }
        }
        // Cancel every held task; advance the clock until every deadline has passed (a deadline
        // timer may register its sleep after an advance, so keep advancing).
        for handle in handles.withLock({ Array($0.values) }) { handle.cancel() }
        var rounds = 0
        while done.count < Self.count && rounds < 100_000 {
            clock.advance(by: .seconds(1))
            await Task.yield()
            rounds += 1
        }
        await done.waitFor(Self.count)
        await manager.waitTillAllTasksFinished()
        for _ in 0..<200 { await Task.yield() }

        #expect(done.count == Self.count)
        var byTag: [Int: [Result<Int, any Error>]] = [:]
        for (tag, result) in done.results { byTag[tag, default: []].append(result) }
        #expect(byTag.count == Self.count)
        for index in 0..<Self.count {
            let results = byTag[index] ?? []
            guard results.count == 1, let result = results.first else {
                Issue.record("task \(index) completed \(results.count) times")
                continue
            }
            let outcome = tmDescribe(result)
            switch Kind(rawValue: index % Kind.allCases.count)! {
            case .succeeds, .requeuedOnce:
                #expect(outcome == "success(\(index))")
            case .cancelledRightAway:
                #expect(outcome == "success(\(index))" || outcome == "cancelled", "task \(index): \(outcome)")
            case .timesOut:
                #expect(outcome == "timedOut", "task \(index): \(outcome)")
            case .heldThenCancelled:
                #expect(outcome == "cancelled", "task \(index): \(outcome)")
            case .discarded:
                #expect(outcome == "discarded", "task \(index): \(outcome)")
            case .failsAndJoins:
                #expect(outcome == "failure(TaskManagerTestError(code: 2))", "task \(index): \(outcome)")
            }
        }
        #expect(manager.inspect { $0.isIdle })
        await eventually("every timer and sleeping body was cancelled") { clock.sleeperCount == 0 }
    }

    /// What an awaiting caller's task does, by `index % 4`.
    enum CallerKind: Int, CaseIterable {
        case succeeds, fails, callerCancelled, timesOut
    }

    /// Thousands of `value(of:)` callers on a manager with no interceptors: without a limit each
    /// takes the direct lane; with one, callers finding every slot taken go the general way, so
    /// both lanes run side by side. Every caller gets one answer its kind allows, every ended
    /// task is told once, and the manager ends idle.
    @Test(arguments: [nil, 8] as [Int?])
    func thousandsOfAwaitingCallersEachGetOneAnswer(maximumConcurrentTasks: Int?) async throws {
        let clock = ManualClock()
        let manager = TaskManager(maximumConcurrentTasks: maximumConcurrentTasks, clock: clock)
        let count = 2_000
        let answers = TaskManagerTestCompletions<Int>()
        let forever = Duration.seconds(1_000_000_000)
        var callers: [(task: TaskManagerTestTask<Int>, caller: Task<Void, Never>)] = []
        for index in 0..<count {
            let kind = CallerKind(rawValue: index % CallerKind.allCases.count)!
            let task = TaskManagerTestTask<Int>("\(kind)") { _ in
                switch kind {
                case .succeeds:
                    await Task.yield()
                case .fails:
                    throw TaskManagerTestError(code: index)
                case .callerCancelled, .timesOut:
                    try await clock.sleep(for: forever)
                }
                return index
            }
            let caller = Task {
                do {
                    let value = try await manager.value(of: task, timeout: kind == .timesOut ? .seconds(1) : nil)
                    answers.record(index, .success(value))
                } catch {
                    answers.record(index, .failure(error))
                }
            }
            if kind == .callerCancelled {
                // Sometimes before the caller reaches the manager, mostly after.
                if index % 3 != 0 { await Task.yield() }
                caller.cancel()
            }
            callers.append((task, caller))
        }
        // A deadline's timer may register its sleep after an advance: keep advancing.
        var rounds = 0
        while answers.count < count && rounds < 100_000 {
            clock.advance(by: .seconds(1))
            await Task.yield()
            rounds += 1
        }
        await answers.waitFor(count)
        for (_, caller) in callers { try await caller.boundedValue() }
        try await Task { await manager.waitTillAllTasksFinished() }.boundedValue()

        var byIndex: [Int: [Result<Int, any Error>]] = [:]
        for (index, result) in answers.results { byIndex[index, default: []].append(result) }
        for (index, (task, _)) in callers.enumerated() {
            let results = byIndex[index] ?? []
            guard results.count == 1, let result = results.first else {
                Issue.record("caller \(index) answered \(results.count) times")
                continue
            }
            let outcome: String
            if case .failure(is CancellationError) = result { outcome = "CancellationError" } else { outcome = tmDescribe(result) }
            let told = task.cancellations.all
            switch CallerKind(rawValue: index % CallerKind.allCases.count)! {
            case .succeeds:
                #expect(outcome == "success(\(index))" && told.isEmpty, "caller \(index): \(outcome) \(told)")
            case .fails:
                #expect(outcome == "failure(TaskManagerTestError(code: \(index)))" && told.isEmpty, "caller \(index): \(outcome)")
            case .callerCancelled:
                #expect(outcome == "CancellationError" && told == ["cancelled"], "caller \(index): \(outcome) \(told)")
            case .timesOut:
                #expect(outcome == "timedOut" && told == ["timedOut"], "caller \(index): \(outcome) \(told)")
            }
        }
        #expect(manager.inspect { $0.isIdle })
        await eventually("every deadline timer and sleeping body was cancelled") { clock.sleeperCount == 0 }
    }
}
