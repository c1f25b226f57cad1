import Dispatch
import Observation
import Testing
import TaskKit
import TaskKitTestSupport

/// A serial executor on a dispatch queue that marks its queue, so a test can ask "am I running on
/// this executor?" without trapping.
final class MarkedQueueExecutor: SerialExecutor {
    private static let mark = DispatchSpecificKey<ObjectIdentifier>()
    private let queue = DispatchQueue(label: "TaskKitTests.MarkedQueueExecutor")

    init() {
        queue.setSpecific(key: Self.mark, value: ObjectIdentifier(self))
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    /// Whether the calling code runs on this executor's queue.
    var isCurrent: Bool { DispatchQueue.getSpecific(key: Self.mark) == ObjectIdentifier(self) }
}

/// A custom actor on a marked executor, owning a store.
actor MarkedActor {
    nonisolated let executor = MarkedQueueExecutor()
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    let store = TaskStore<Int>()

    /// Runs `operation` through the store and reports where its first line ran.
    func whereDoesALiteralRun() async -> Bool {
        let executor = executor
        let task = store.addTask(forKey: 1) { () async throws -> Bool in executor.isCurrent }
        return (try? await task.boundedValue()) ?? false
    }

    func whereDoesAConcurrentFunctionRun() async -> Bool {
        let task = store.addTask(forKey: 1) { () async throws -> Bool in await concurrentProbe() }
        return (try? await task.boundedValue()) ?? true
    }
}

/// A global actor on a marked executor: the shape of a `@MainActor` SwiftUI model.
@globalActor actor MarkedGlobalActor {
    static let shared = MarkedGlobalActor()
    nonisolated let executor = MarkedQueueExecutor()
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
}

/// The seed's model: a global-actor class whose store runs `{ await self.doThing() }`.
@MarkedGlobalActor final class MarkedModel {
    let store = TaskStore<String>()
    private(set) var startedOnModelActor: [Bool] = []

    func doThing(startedOnModelActor: Bool) async {
        self.startedOnModelActor.append(startedOnModelActor)
    }

    func doThingButtonTapped() -> Task<Void, Never> {
        store.addTask(forKey: "thing") {
            let here = MarkedGlobalActor.shared.executor.isCurrent
            await self.doThing(startedOnModelActor: here)
        }
    }
}

let concurrentProbeExecutor = MarkedActor()

@concurrent func concurrentProbe() async -> Bool {
    concurrentProbeExecutor.executor.isCurrent
}

/// Where the operation runs: `nonisolated(nonsending)`, so on the store's actor unless it is
/// isolated elsewhere itself.
@Suite struct TaskStoreOperationIsolationTests {
    @Test func aClosureLiteralRunsOnTheStoresActorWithoutAHop() async {
        let owner = MarkedActor()
        #expect(await owner.whereDoesALiteralRun())
    }

    @Test func theSeedsModelRunsItsOperationOnTheModelsActor() async {
        let model = await MarkedModel()
        for _ in 0..<20 { await model.doThingButtonTapped().value }
        #expect(await model.startedOnModelActor == Array(repeating: true, count: 20))
    }

    @Test func aConcurrentFunctionLeavesTheActor() async {
        #expect(await concurrentProbeExecutor.whereDoesAConcurrentFunctionRun() == false)
    }
}

// The "Where the operation runs" example of the UsingTaskStore article, kept compiling and checked.

@concurrent
func parseLines(_ text: String) async -> [String] {
    text.split(separator: "\n").map(String.init)
}

@MainActor @Observable final class LogModel {
    enum TaskKey: Hashable { case load }
    private let tasks = TaskStore<TaskKey>()
    private(set) var lines: [String] = []

    func download() async -> String { "first\nsecond" }
    func show(_ lines: [String]) { self.lines = lines }

    func loadButtonTapped() {
        tasks.addTask(forKey: .load) {
            let text = await self.download()
            let lines = await parseLines(text)
            await self.show(lines)
        }
    }

    /// Test hook: waits for the load to finish.
    func waitForLoad() async {
        await eventually("the load finished") { !tasks.taskIsRunning(forKey: .load) }
    }
}

@MainActor
@Suite struct TaskStoreArticleOperationExampleTests {
    @Test(.scaledTimeLimit(minutes: 1)) func theLogModelLoadsAndShowsItsLines() async {
        let model = LogModel()
        model.loadButtonTapped()
        await model.waitForLoad()
        #expect(model.lines == ["first", "second"])
    }
}
