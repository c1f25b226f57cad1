import SeedWorkloads

/// The TaskStore workloads of `TaskStoreBenchmarks` (`ModelBench`, `StoreBench`), the
/// TaskManager round trip of `TaskManagerBenchmarks` and the MonoTask and KeyedMonoTask cache
/// hits, by their command-line names: `n` sequential round trips (or hits) each.
enum TaskStoreWorkload: String, CaseIterable {
    /// The seed's model: a bare `Task { await self.doThing() }`.
    case modelBare = "taskstore-bare"
    /// The seed's model: `store.addTask { await self.doThing() }`.
    case model = "taskstore"
    /// The seed's model: a bare `Task` keeping an `@Observable` "is running" flag.
    case modelFlagBare = "taskstore-flag-bare"
    /// The seed's model with its store read once (observation notifications on).
    case modelRead = "taskstore-read"
    /// The seed's model, a `@concurrent` operation: a bare `Task` written in the model.
    case modelConcurrentBare = "taskstore-concurrent-bare"
    /// The seed's model, a `@concurrent` operation: the store.
    case modelConcurrent = "taskstore-concurrent"
    /// A plain `actor`, a `@concurrent` operation: a nonisolated bare `Task`.
    case actorBare = "taskstore-actor-bare"
    /// A plain `actor`, a `@concurrent` operation: the store.
    case actorStore = "taskstore-actor"
    /// `TaskManager.value(of:)`, one task at a time (issue 20's round trip).
    case managerRoundTrip = "taskmanager-value"
    /// The same through one pass-through interceptor (the general lane).
    case managerInterceptedRoundTrip = "taskmanager-value-intercepted"
    /// Its hand-written alternative: `addTask` + `next()` on one task group.
    case taskGroupRoundTrip = "taskgroup-roundtrip"
    /// `TaskManager.add(task:completion:)` through one pass-through interceptor, all at once,
    /// then waited for (issue 20's throughput).
    case managerThroughput = "taskmanager-throughput"
    /// Its hand-written alternative: as many tasks on one task group.
    case taskGroupThroughput = "taskgroup-throughput"
    /// A `MonoTask` cache hit (`asyncExecute()`, result never expires).
    case monoTaskHit = "monotask-hit"
    /// A `KeyedMonoTask` cache hit (`value(for:)`, 1,000 keys in order).
    case keyedMonoTaskHit = "keyedmonotask-hit"
    /// The floor of a shared cache's hit: a `Mutex<[Int: Int]>` lookup, 1,000 keys in order.
    case lockedDictionaryHit = "locked-dictionary-hit"
    /// A batch of 100 callers merged into one `MonoTask` execution (issue 20's merge).
    case monoTaskMerged = "monotask-merged"
    /// A batch of 100 callers merged into one `KeyedMonoTask` load of one key (issue 35).
    case keyedMonoTaskMerged = "keyedmonotask-merged"
    /// Rounds of 1,000 keys x 100 concurrent callers (the benchmark's workload), per round. For
    /// profiling only, not in `instruction-counts.sh`: under valgrind the two threads run in
    /// turn, so the actor's count is not the one it has natively (NOTES, 2026-11-28).
    case keyedMonoTaskEveryKey = "keyedmonotask-every-key"
    /// The same rounds through the hand-written actor cache.
    case actorEveryKey = "actor-every-key"
    /// The same batch on the hand-written actor holding a `Task`.
    case actorMerged = "actor-merged"
    /// The floor of a batch: 100 task-group children waiting for one gate.
    case gateMerged = "gate-merged"
    /// One fan-out round (issue 36): 1,000 task-group children ask for 1,000 distinct keys of a
    /// new `KeyedMonoTask` with a batch loader (batches of 100), whose backend costs fixed CPU
    /// work per call.
    case keyedMonoTaskFanOutBatched = "keyedmonotask-fanout-batched"
    /// The same round through the hand-written `DataLoader` actor.
    case dataLoaderFanOut = "dataloader-fanout"
    /// The same round through the `DataLoader` with cancellable callers (`cancellableValue(for:)`).
    case dataLoaderFanOutCancellable = "dataloader-fanout-cancellable"
    /// The same round through a `KeyedMonoTask` with a loader of one key (1,000 backend calls).
    case keyedMonoTaskFanOutSingle = "keyedmonotask-fanout-single"

    /// Runs the workload `n` times.
    func run(_ n: Int) async {
        switch self {
        case .modelBare: await ModelBench().bareRoundTrips(n)
        case .model: await ModelBench().storeRoundTrips(n)
        case .modelFlagBare:
            let model = await ModelBench()
            await model.bareFlaggedRoundTrips(n, flag: await ObservableFlag())
        case .modelRead:
            let model = await ModelBench()
            _ = await model.readStoreOnce()
            await model.storeRoundTrips(n)
        case .modelConcurrentBare: await ModelBench().bareConcurrentRoundTrips(n)
        case .modelConcurrent: await ModelBench().storeConcurrentRoundTrips(n)
        case .actorBare: await StoreBench().bareRoundTrips(n)
        case .actorStore: await StoreBench().storeRoundTrips(n)
        case .managerRoundTrip:
            let sum = await managerRoundTrips(n)
            precondition(sum == n * (n - 1) / 2, "every round trip returned its value")
        case .managerInterceptedRoundTrip:
            let sum = await managerInterceptedRoundTrips(n)
            precondition(sum == n * (n - 1) / 2, "every round trip returned its value")
        case .taskGroupRoundTrip:
            let sum = await taskGroupRoundTrips(n)
            precondition(sum == n * (n - 1) / 2, "every round trip returned its value")
        case .monoTaskHit:
            let sum = await monoTaskHits(n)
            precondition(sum == n, "every hit returned the cached value")
        case .managerThroughput:
            let sum = await SeedWorkloads.managerThroughput(n)
            precondition(sum == n * (n - 1) / 2, "every task ran once")
        case .taskGroupThroughput:
            let sum = await SeedWorkloads.taskGroupThroughput(n)
            precondition(sum == n * (n - 1) / 2, "every task ran once")
        case .monoTaskMerged:
            for _ in 0..<n { await monoTaskMergedBatch() }
        case .actorMerged:
            for _ in 0..<n { await actorMergedBatch() }
        case .gateMerged:
            for _ in 0..<n { await gateMergedBatch() }
        case .keyedMonoTaskMerged:
            for _ in 0..<n { await keyedMonoTaskMergedBatch() }
        case .keyedMonoTaskEveryKey:
            for _ in 0..<n { await keyedMonoTaskEveryKeyRound() }
        case .actorEveryKey:
            for _ in 0..<n { await actorEveryKeyRound() }
        case .keyedMonoTaskFanOutBatched:
            for _ in 0..<n { _ = await keyedMonoTaskBatchedFanOut() }
        case .dataLoaderFanOut:
            for _ in 0..<n { _ = await SeedWorkloads.dataLoaderFanOut() }
        case .dataLoaderFanOutCancellable:
            for _ in 0..<n { _ = await SeedWorkloads.dataLoaderFanOut(callers: .cancellable) }
        case .keyedMonoTaskFanOutSingle:
            for _ in 0..<n { _ = await keyedMonoTaskSingleFanOut() }
        case .keyedMonoTaskHit:
            let sum = await keyedMonoTaskHits(n)
            precondition(sum == n, "every hit returned the cached value")
        case .lockedDictionaryHit:
            let sum = await lockedDictionaryHits(n)
            precondition(sum == n, "every lookup found its key")
        }
    }
}
