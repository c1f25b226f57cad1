import Observation
import Testing
import TaskKit
import TaskKitTestSupport
import TaskKitTesting

// The model of the DocC article "TaskStore" (TaskKit.docc/TaskStore.md), compiled. Keep the two
// in sync: the article shows this code, with the SwiftUI view that Linux cannot compile.

@MainActor
@Observable
final class MyModel {
    private enum TaskKey: Hashable {
        case doThing
        case viewTask
    }

    var someText = ""
    var items: [String] = []

    private let taskStore = TaskStore<TaskKey>()
    private let clock: any Clock<Duration>

    init(clock: any Clock<Duration> = ContinuousClock()) {
        self.clock = clock
    }

    var doThingButtonEnabled: Bool {
        !taskStore.taskIsRunning(forKey: .doThing)
    }

    var showCancelButton: Bool {
        taskStore.taskIsRunning(forKey: .doThing)
    }

    var isLoading: Bool {
        taskStore.taskIsRunning(forKey: .viewTask)
    }

    @discardableResult
    func doThingButtonTapped() -> Task<Void, Never> {
        taskStore.addTask(forKey: .doThing) {
            // Stands in for a request to a server.
            try? await self.clock.sleep(for: .seconds(1))
            await self.doThingResponse()
        }
    }

    func cancelButtonTapped() {
        taskStore.cancelTask(forKey: .doThing)
    }

    func viewTask() -> Task<Void, Never> {
        taskStore.addTask(forKey: .viewTask) {
            do {
                try await self.clock.sleep(for: .seconds(2))
                await self.itemsLoaded(["a", "b"])
            } catch {
                // Cancelled: the view went away.
            }
        }
    }

    private func doThingResponse() {
        guard !Task.isCancelled else { return }
        someText += "!"
    }

    private func itemsLoaded(_ items: [String]) {
        self.items = items
    }
}

@MainActor
@Suite struct TaskStoreModelExampleTests {
    let clock = ManualClock()

    @Test func doThingDisablesTheButtonAndShowsCancelWhileRunning() async {
        let model = MyModel(clock: clock)
        #expect(model.doThingButtonEnabled && !model.showCancelButton)
        let task = model.doThingButtonTapped()
        #expect(!model.doThingButtonEnabled && model.showCancelButton)
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(1))
        await task.value
        #expect(model.someText == "!")
        #expect(model.doThingButtonEnabled && !model.showCancelButton)
    }

    @Test func tappingAgainRestartsTheWork() async {
        let model = MyModel(clock: clock)
        let first = model.doThingButtonTapped()
        let second = model.doThingButtonTapped()
        await first.value  // cancelled by the second tap: no "!"
        #expect(model.showCancelButton, "the second tap's task still runs")
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(1))
        await second.value
        #expect(model.someText == "!")
    }

    @Test func theCancelButtonStopsTheWork() async {
        let model = MyModel(clock: clock)
        let task = model.doThingButtonTapped()
        await clock.waitForSleepers(count: 1)
        model.cancelButtonTapped()
        await task.value
        #expect(model.someText == "")
        #expect(model.doThingButtonEnabled)
    }

    @Test func viewTaskCompletesWhenAwaited() async throws {
        let model = MyModel(clock: clock)
        // What `.task { await model.viewTask().cancellableValue }` does when the view stays.
        let view = Task { await model.viewTask().cancellableValue }
        await clock.waitForSleepers(count: 1)
        #expect(model.isLoading)
        clock.advance(by: .seconds(2))
        try await view.boundedValue()
        #expect(model.items == ["a", "b"])
        #expect(!model.isLoading)
    }

    @Test func viewTaskIsCancelledWhenTheViewDisappears() async throws {
        let model = MyModel(clock: clock)
        // SwiftUI cancels the `.task` when the view disappears.
        let view = Task { await model.viewTask().cancellableValue }
        await clock.waitForSleepers(count: 1)
        view.cancel()
        try await view.boundedValue()  // returns only after the stored task finished
        #expect(!model.isLoading)
        #expect(model.items.isEmpty)
        #expect(clock.sleeperCount == 0)
    }
}

/// `Task.cancellableValue` on its own.
@Suite struct CancellableValueTests {
    @Test func aNeverFailingTaskIsCancelledWithTheAwaitingTask() async throws {
        let inner = Task { await TestGate().waitOrCancel(); return Task.isCancelled }
        let outer = Task { await inner.cancellableValue }
        outer.cancel()
        #expect(try await outer.boundedValue() == true)
        #expect(inner.isCancelled)
    }

    @Test func aThrowingTaskIsCancelledWithTheAwaitingTaskAndItsErrorPropagates() async {
        let inner = Task { () async throws -> Int in
            await TestGate().waitOrCancel()
            try Task.checkCancellation()
            return 1
        }
        let outer = Task { try await inner.cancellableValue }
        outer.cancel()
        await #expect(throws: CancellationError.self) { try await outer.boundedValue() }
    }

    @Test func anAlreadyCancelledAwaiterCancelsAtOnceAndValuesPassThroughOtherwise() async throws {
        let gate = TestGate()
        let inner = Task { await gate.waitOrCancel(); return Task.isCancelled }
        let outer = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await inner.cancellableValue
        }
        #expect(try await outer.boundedValue() == true)
        let plain = Task { () async throws -> Int in 5 }
        #expect(try await Task { try await plain.cancellableValue }.value == 5)
        #expect(await Task { await Task { 6 }.cancellableValue }.value == 6)
    }
}
