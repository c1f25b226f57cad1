// TaskStore's workloads: the seed's model and a plain actor, each with a store and the bare `Task`
// it is compared with. Shared by the ordo-one benchmark (TaskStoreBenchmarks) and the callgrind
// driver (InstructionCounts), so both measure the same code. Both sides of every comparison run
// on the same actor and call the same operation, so the difference is the store's bookkeeping
// (dictionary entry, identity, observation registrar, isolation check) plus its wrapper closure.
import Observation
import TaskKit

/// The actor of the seed's model: a global actor, as `@MainActor` is for a SwiftUI model (the
/// main actor itself is not used because the benchmark runner owns the main thread).
@globalActor public actor ModelActor {
    public static let shared = ModelActor()
}

/// The seed's pattern: a global-actor model whose store runs `{ await self.doThing() }`. A bare
/// `Task { await self.doThing() }` written in the same place inherits the model's actor, and so
/// does the store's operation (a closure literal converted to `nonisolated(nonsending)`).
@ModelActor public final class ModelBench {
    public let store = TaskStore<Int>()
    public private(set) var things = 0

    public init() {}

    public func doThing() async { things &+= 1 }

    /// Creates a bare `Task` running `doThing()` and awaits it, `count` times.
    public func bareRoundTrips(_ count: Int) async {
        for _ in 0..<count { await Task { await self.doThing() }.value }
    }

    /// Adds a task running `doThing()` under one key and awaits it, `count` times.
    public func storeRoundTrips(_ count: Int) async {
        for _ in 0..<count { await store.addTask(forKey: 0) { await self.doThing() }.value }
    }

    /// What a model without a store does to show a spinner: a bare `Task` that sets an
    /// observable flag around the work (two observation-registrar mutations per run, like a read
    /// store's start and stop).
    public func bareFlaggedRoundTrips(_ count: Int, flag: ObservableFlag) async {
        for _ in 0..<count {
            await Task {
                flag.isRunning = true
                await self.doThing()
                flag.isRunning = false
            }.value
        }
    }

    /// A bare `Task` written in the model running the `@concurrent` operation, `count` times: it
    /// inherits the model's actor, starts there, hops off for the operation and back.
    public func bareConcurrentRoundTrips(_ count: Int) async {
        for _ in 0..<count { await Task { await concurrentOperation() }.value }
    }

    /// The store running the `@concurrent` operation, `count` times (the same trips).
    public func storeConcurrentRoundTrips(_ count: Int) async {
        for _ in 0..<count { await store.addTask(forKey: 0, operation: concurrentOperation).value }
    }

    /// Reads the store once, as a view does: from then on every key that starts or stops goes
    /// through the observation registrar (`willSet`/`didSet`), whether or not anyone observes.
    public func readStoreOnce() -> Bool {
        store.taskIsRunning(forKey: 0)
    }
}

/// The hand-rolled "is running" state of a model that has no store.
@ModelActor @Observable public final class ObservableFlag {
    public var isRunning = false

    public init() {}
}

/// An operation that leaves the actor: a `@concurrent` closure value, the same for the store and
/// for a bare `Task`. The store's task starts on the actor, hops off for it and back to remove its
/// entry. A bare `Task` written in `ModelBench` inherits the global actor and makes the same
/// hops; one written in `StoreBench` is nonisolated (it captures nothing isolated) and runs the
/// operation where it starts.
public let concurrentOperation: @Sendable () async -> Void = {}

/// Owns one store; every call runs on this actor, as a store requires.
public actor StoreBench {
    public let store = TaskStore<Int>()
    private var parked: [Task<Void, Never>] = []

    public init() {}

    /// Creates a bare (nonisolated) `Task` and awaits it, `count` times.
    public func bareRoundTrips(_ count: Int) async {
        for _ in 0..<count { await Task { await concurrentOperation() }.value }
    }

    /// Adds a task under one key and awaits it, `count` times (the key starts and stops each time).
    public func storeRoundTrips(_ count: Int, key: Int = 0) async {
        for _ in 0..<count { await store.addTask(forKey: key, operation: concurrentOperation).value }
    }

    /// Creates `count` bare tasks, then awaits them all.
    public func bareBatch(_ count: Int) async {
        var tasks: [Task<Void, Never>] = []
        tasks.reserveCapacity(count)
        for _ in 0..<count { tasks.append(Task { await concurrentOperation() }) }
        for task in tasks { await task.value }
    }

    /// Adds `count` tasks under distinct keys (all live at once), then awaits them all.
    public func storeBatch(_ count: Int) async {
        var tasks: [Task<Void, Never>] = []
        tasks.reserveCapacity(count)
        for key in 0..<count { tasks.append(store.addTask(forKey: key, operation: concurrentOperation)) }
        for task in tasks { await task.value }
    }

    /// Checks `count` keys for running tasks.
    public func lookups(_ count: Int, liveKeys: Int) -> Int {
        var running = 0
        for i in 0..<count where store.taskIsRunning(forKey: -1 - (i % liveKeys)) { running += 1 }
        return running
    }

    /// Parks `liveKeys` tasks under keys -1, -2, … that run until cancelled.
    public func park(liveKeys: Int) {
        for key in 0..<liveKeys {
            parked.append(store.addTask(forKey: -1 - key) { try? await Task.sleep(for: .seconds(86_400)) })
        }
    }

    public func unpark() async {
        store.cancelAllTasks()
        for task in parked { await task.value }
        parked = []
    }
}
