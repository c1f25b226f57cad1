import Benchmark
import Observation
import TaskKit

// What TaskStore costs on top of the `Task` it creates, and whether that cost depends on how many
// keys are live. Both sides of every comparison run on the same actor and call the same operation,
// so the difference is the store's bookkeeping (dictionary entry, identity, observation
// registrar, isolation check) plus its wrapper closure.

/// The actor of the seed's model: a global actor, as `@MainActor` is for a SwiftUI model (the
/// main actor itself is not used because the benchmark runner owns the main thread).
@globalActor actor ModelActor {
    static let shared = ModelActor()
}

/// The seed's pattern: a global-actor model whose store runs `{ await self.doThing() }`. A bare
/// `Task { await self.doThing() }` written in the same place inherits the model's actor, and so
/// does the store's operation (a closure literal converted to `nonisolated(nonsending)`).
@ModelActor final class ModelBench {
    let store = TaskStore<Int>()
    private(set) var things = 0

    func doThing() async { things &+= 1 }

    /// Creates a bare `Task` running `doThing()` and awaits it, `count` times.
    func bareRoundTrips(_ count: Int) async {
        for _ in 0..<count { await Task { await self.doThing() }.value }
    }

    /// Adds a task running `doThing()` under one key and awaits it, `count` times.
    func storeRoundTrips(_ count: Int) async {
        for _ in 0..<count { await store.addTask(forKey: 0) { await self.doThing() }.value }
    }

    /// What a model without a store does to show a spinner: a bare `Task` that sets an
    /// observable flag around the work (two observation-registrar mutations per run, like a read
    /// store's start and stop).
    func bareFlaggedRoundTrips(_ count: Int, flag: ObservableFlag) async {
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
    func bareConcurrentRoundTrips(_ count: Int) async {
        for _ in 0..<count { await Task { await operation() }.value }
    }

    /// The store running the `@concurrent` operation, `count` times (the same trips).
    func storeConcurrentRoundTrips(_ count: Int) async {
        for _ in 0..<count { await store.addTask(forKey: 0, operation: operation).value }
    }

    /// Reads the store once, as a view does: from then on every key that starts or stops goes
    /// through the observation registrar (`willSet`/`didSet`), whether or not anyone observes.
    func readStoreOnce() -> Bool {
        store.taskIsRunning(forKey: 0)
    }
}

/// The hand-rolled "is running" state of a model that has no store.
@ModelActor @Observable final class ObservableFlag {
    var isRunning = false
}

/// An operation that leaves the actor: a `@concurrent` closure value, the same for the store and
/// for a bare `Task`. The bare `Task` (nonisolated: it captures nothing isolated) runs it where it
/// starts; the store's task starts on the actor, hops off for it and back to remove its entry.
let operation: @Sendable () async -> Void = {}

/// Owns one store; every call runs on this actor, as a store requires.
actor StoreBench {
    let store = TaskStore<Int>()
    private var parked: [Task<Void, Never>] = []

    /// Creates a bare `Task` and awaits it, `count` times.
    func bareRoundTrips(_ count: Int) async {
        for _ in 0..<count { await Task { await operation() }.value }
    }

    /// Adds a task under one key and awaits it, `count` times (the key starts and stops each time).
    func storeRoundTrips(_ count: Int, key: Int = 0) async {
        for _ in 0..<count { await store.addTask(forKey: key, operation: operation).value }
    }

    /// Creates `count` bare tasks, then awaits them all.
    func bareBatch(_ count: Int) async {
        var tasks: [Task<Void, Never>] = []
        tasks.reserveCapacity(count)
        for _ in 0..<count { tasks.append(Task { await operation() }) }
        for task in tasks { await task.value }
    }

    /// Adds `count` tasks under distinct keys (all live at once), then awaits them all.
    func storeBatch(_ count: Int) async {
        var tasks: [Task<Void, Never>] = []
        tasks.reserveCapacity(count)
        for key in 0..<count { tasks.append(store.addTask(forKey: key, operation: operation)) }
        for task in tasks { await task.value }
    }

    /// Checks `count` keys for running tasks.
    func lookups(_ count: Int, liveKeys: Int) -> Int {
        var running = 0
        for i in 0..<count where store.taskIsRunning(forKey: -1 - (i % liveKeys)) { running += 1 }
        return running
    }

    /// Parks `liveKeys` tasks under keys -1, -2, … that run until cancelled.
    func park(liveKeys: Int) {
        for key in 0..<liveKeys {
            parked.append(store.addTask(forKey: -1 - key) { try? await Task.sleep(for: .seconds(86_400)) })
        }
    }

    func unpark() async {
        store.cancelAllTasks()
        for task in parked { await task.value }
        parked = []
    }
}

let benchmarks: @Sendable () -> Void = {
    let perOperation = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .instructions],
        scalingFactor: .kilo,
        maxDuration: .seconds(2)
    )

    // MARK: addTask against a bare Task

    Benchmark("Model: bare Task { await self.doThing() } + await (x1000)", configuration: perOperation) {
        benchmark in
        let model = await ModelBench()
        await model.bareRoundTrips(benchmark.scaledIterations.count)
    }
    Benchmark("Model: TaskStore.addTask { await self.doThing() } + await (x1000)", configuration: perOperation) {
        benchmark in
        let model = await ModelBench()
        await model.storeRoundTrips(benchmark.scaledIterations.count)
    }
    Benchmark("Model: bare Task { flag; await self.doThing(); flag } + await (x1000)", configuration: perOperation) {
        benchmark in
        let model = await ModelBench()
        let flag = await ObservableFlag()
        await model.bareFlaggedRoundTrips(benchmark.scaledIterations.count, flag: flag)
    }
    Benchmark("Model: TaskStore.addTask { await self.doThing() } + await, store read (x1000)", configuration: perOperation) {
        benchmark in
        let model = await ModelBench()
        blackHole(await model.readStoreOnce())
        await model.storeRoundTrips(benchmark.scaledIterations.count)
    }

    Benchmark("Model: bare Task { await operation() } + await, a @concurrent operation (x1000)", configuration: perOperation) {
        benchmark in
        let model = await ModelBench()
        await model.bareConcurrentRoundTrips(benchmark.scaledIterations.count)
    }
    Benchmark("Model: TaskStore.addTask(operation:) + await, a @concurrent operation (x1000)", configuration: perOperation) {
        benchmark in
        let model = await ModelBench()
        await model.storeConcurrentRoundTrips(benchmark.scaledIterations.count)
    }

    let bare = StoreBench()
    Benchmark("Bare Task: create + await (x1000)", configuration: perOperation) { benchmark in
        await bare.bareRoundTrips(benchmark.scaledIterations.count)
    }
    let roundTrips = StoreBench()
    Benchmark("TaskStore.addTask: create + await (x1000)", configuration: perOperation) { benchmark in
        await roundTrips.storeRoundTrips(benchmark.scaledIterations.count)
    }
    let bareBatch = StoreBench()
    Benchmark("Bare Task: create 1000, then await all", configuration: perOperation) { benchmark in
        await bareBatch.bareBatch(benchmark.scaledIterations.count)
    }
    let storeBatch = StoreBench()
    Benchmark("TaskStore.addTask: create 1000 keys, then await all", configuration: perOperation) { benchmark in
        await storeBatch.storeBatch(benchmark.scaledIterations.count)
    }

    // MARK: cost per operation with many live keys

    /// `perOperation`, with `liveKeys` tasks parked in `bench`'s store around the benchmark.
    func parked(_ bench: StoreBench, liveKeys: Int) -> Benchmark.Configuration {
        var configuration = perOperation
        configuration.setup = { await bench.park(liveKeys: liveKeys) }
        configuration.teardown = { await bench.unpark() }
        return configuration
    }

    for liveKeys in [100, 10_000] {
        // Two stores: the lookups read theirs, which turns its observation notifications on (see
        // the "store read" row), and must not change the round trips measured beside them.
        let roundTrips = StoreBench(), lookups = StoreBench()
        Benchmark(
            "TaskStore.addTask: create + await, \(liveKeys) live keys (x1000)",
            configuration: parked(roundTrips, liveKeys: liveKeys)
        ) { benchmark in
            await roundTrips.storeRoundTrips(benchmark.scaledIterations.count)
        }
        Benchmark(
            "TaskStore.taskIsRunning, \(liveKeys) live keys (x1000)",
            configuration: parked(lookups, liveKeys: liveKeys)
        ) { benchmark in
            blackHole(await lookups.lookups(benchmark.scaledIterations.count, liveKeys: liveKeys))
        }
    }
}
