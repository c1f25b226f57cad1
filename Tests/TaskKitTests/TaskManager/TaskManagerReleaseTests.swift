import Testing
@testable import TaskKit
import TaskKitTestSupport

/// When the manager lets go of a finished task: its box (with the task and its completion) is
/// released by the next add, on the adding thread, or by the delivery that finishes it when the
/// manager is settled or ``TaskManagerStorage/retiredLimit`` boxes wait. Never later: a settled
/// manager holds no finished task. On every lane: the direct one without and with interceptors,
/// and the general one (a manager with a reactor).
@Suite struct TaskManagerReleaseTests {
    /// Counts its `deinit` at `released`; `execute` runs `body` first.
    final class CountedTask: ManagedTask {
        typealias SuccessValue = Int
        let value: Int
        let released: TestGate
        let body: (@Sendable () async -> Void)?

        init(_ value: Int, released: TestGate, body: (@Sendable () async -> Void)? = nil) {
            self.value = value
            self.released = released
            self.body = body
        }

        func execute() async throws -> Int {
            await body?()
            return value
        }

        deinit { released.arrive() }
    }

    struct PassThrough: Interceptor {
        func intercept<T: ManagedTask>(task: inout T, currentBatchCount: Int) -> InterceptCommand { .execute }
    }

    /// A reactor that never reacts: its manager takes the general lane.
    struct NeverReacts: Reactor {
        func shouldExecute<T: ManagedTask>(
            after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
        ) -> Bool { false }
        func execute() async throws {}
    }

    enum Lane: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case direct, intercepting, general
        var testDescription: String { rawValue }
    }

    static func manager(_ lane: Lane) -> TaskManager {
        switch lane {
        case .direct: TaskManager()
        case .intercepting: TaskManager(interceptors: [PassThrough()])
        case .general: TaskManager(interceptors: [PassThrough()], reactors: [NeverReacts()])
        }
    }

    @Test(arguments: Lane.allCases)
    func aSettledManagerHoldsNoFinishedTask(lane: Lane) async throws {
        let manager = Self.manager(lane)
        let released = TestGate()
        for index in 0..<20 { manager.add(task: CountedTask(index, released: released)) }
        #expect(try await manager.value(of: CountedTask(20, released: released)) == 20)
        await manager.waitTillAllTasksFinished()
        await released.waitForArrivals(21)
        #expect(manager.storage.retiredCount == 0)
    }

    @Test(arguments: Lane.allCases)
    func aBusyManagerReleasesFinishedTasksAtTheNextAddOrAtTheLimit(lane: Lane) async throws {
        let manager = Self.manager(lane)
        let limit = TaskManagerStorage.retiredLimit
        let count = 2 * limit + 10
        // A held task keeps the manager from settling.
        let hold = TestGate()
        let heldReleased = TestGate()
        manager.add(task: CountedTask(-1, released: heldReleased) { await hold.wait() })
        // `count` tasks that finish together, after the last of them was added: no add comes
        // between their ends.
        let go = TestGate()
        let released = TestGate()
        let started = TestGate()
        for index in 0..<count {
            manager.add(task: CountedTask(index, released: released) {
                started.arrive()
                await go.wait()
            })
        }
        await started.waitForArrivals(count)
        go.open()
        // The jobs release the boxes in lists of `limit`; the rest wait for an add.
        await released.waitForArrivals(2 * limit)
        await eventually("the jobs released two full lists") { manager.storage.retiredCount == count - 2 * limit }
        #expect(released.arrivals == 2 * limit)
        // The next add releases them.
        let late = TestGate()
        #expect(try await manager.value(of: CountedTask(count, released: late)) == count)
        await released.waitForArrivals(count)
        // Settling releases the rest.
        hold.open()
        await manager.waitTillAllTasksFinished()
        await heldReleased.waitForArrivals(1)
        await late.waitForArrivals(1)
        #expect(manager.storage.retiredCount == 0)
    }

    @Test(arguments: [Lane.intercepting, .general])
    func everyTaskIsReleasedUnderConcurrentAddsAndDeliveries(lane: Lane) async throws {
        let manager = Self.manager(lane)
        let released = TestGate()
        let adders = 8
        let perAdder = 400
        let sum = LockedState(0)
        await withTaskGroup(of: Void.self) { group in
            for adder in 0..<adders {
                group.addTask {
                    for index in 0..<perAdder {
                        let value = adder * perAdder + index
                        if index.isMultiple(of: 4) {
                            let result = try? await manager.value(of: CountedTask(value, released: released))
                            sum.withLock { $0 += result ?? 0 }
                        } else {
                            manager.add(task: CountedTask(value, released: released)) { result in
                                if case .success(let value) = result { sum.withLock { $0 += value } }
                            }
                        }
                    }
                }
            }
        }
        await manager.waitTillAllTasksFinished()
        let total = adders * perAdder
        #expect(sum.withLock { $0 } == total * (total - 1) / 2)
        await released.waitForArrivals(total)
        #expect(manager.storage.retiredCount == 0)
    }
}
