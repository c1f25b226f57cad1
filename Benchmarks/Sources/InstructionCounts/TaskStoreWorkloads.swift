import Observation
import TaskKit

// TaskStore's `addTask` + await against a bare `Task` with the same operation, as in
// `TaskStoreBenchmarks`, for callgrind: one actor, `n` sequential round trips.

/// The actor of the seed's model (a global actor, as `@MainActor` is for a SwiftUI model).
@globalActor actor CountedModelActor {
    static let shared = CountedModelActor()
}

/// An operation that leaves the actor, shared by the store and the bare `Task`.
let concurrentOperation: @Sendable () async -> Void = {}

@CountedModelActor final class CountedModel {
    let store = TaskStore<Int>()
    private(set) var things = 0

    func doThing() async { things &+= 1 }

    /// `Task { await self.doThing() }` + await, `n` times.
    func bare(_ n: Int) async {
        for _ in 0..<n { await Task { await self.doThing() }.value }
    }

    /// `store.addTask(forKey: 0) { await self.doThing() }` + await, `n` times.
    func store(_ n: Int) async {
        for _ in 0..<n { await store.addTask(forKey: 0) { await self.doThing() }.value }
    }

    /// A bare `Task` that sets an observable "is running" flag around `doThing()`, `n` times:
    /// what a model without a store does to show a spinner (the baseline of `storeRead`).
    func bareFlagged(_ n: Int) async {
        let flag = CountedFlag()
        for _ in 0..<n {
            await Task {
                flag.isRunning = true
                await self.doThing()
                flag.isRunning = false
            }.value
        }
    }

    /// As `store`, once the store has been read (observation notifications on).
    func storeRead(_ n: Int) async {
        _ = store.taskIsRunning(forKey: 0)
        await store(n)
    }

    /// A nonisolated bare `Task` running the `@concurrent` operation, `n` times (as in
    /// `TaskStoreBenchmarks`, where the bare `Task` captures nothing isolated).
    func bareConcurrent(_ n: Int) async {
        for _ in 0..<n { await Self.nonisolatedTask().value }
    }

    /// A bare `Task` written in the model running the `@concurrent` operation, `n` times: it
    /// inherits the model's actor, so it makes the same switches off the actor and back as the
    /// store's task.
    func modelBareConcurrent(_ n: Int) async {
        for _ in 0..<n { await Task { await concurrentOperation() }.value }
    }

    /// A `Task` created outside the global actor, so it starts on the global executor: written
    /// in the class's body, it would inherit `@CountedModelActor`.
    nonisolated static func nonisolatedTask() -> Task<Void, Never> {
        Task { await concurrentOperation() }
    }

    /// The store running the `@concurrent` operation, `n` times.
    func storeConcurrent(_ n: Int) async {
        for _ in 0..<n { await store.addTask(forKey: 0, operation: concurrentOperation).value }
    }
}

/// The hand-kept "is running" state of a model without a store.
@CountedModelActor @Observable final class CountedFlag {
    var isRunning = false
}

/// The TaskStore workloads, by their command-line names.
enum TaskStoreWorkload: String {
    case bare = "taskstore-bare"
    case store = "taskstore"
    case storeRead = "taskstore-read"
    case bareFlagged = "taskstore-flag-bare"
    case bareConcurrent = "taskstore-concurrent-bare"
    case modelBareConcurrent = "taskstore-concurrent-model-bare"
    case storeConcurrent = "taskstore-concurrent"

    /// Runs the workload `n` times.
    func run(_ n: Int) async {
        let model = await CountedModel()
        switch self {
        case .bare: await model.bare(n)
        case .store: await model.store(n)
        case .storeRead: await model.storeRead(n)
        case .bareFlagged: await model.bareFlagged(n)
        case .bareConcurrent: await model.bareConcurrent(n)
        case .modelBareConcurrent: await model.modelBareConcurrent(n)
        case .storeConcurrent: await model.storeConcurrent(n)
        }
    }
}
