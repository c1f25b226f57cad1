import Benchmark
import SeedWorkloads

// What TaskStore costs on top of the `Task` it creates, and whether that cost depends on how many
// keys are live. The workloads (`ModelBench`, `StoreBench`) live in SeedWorkloads, shared with
// `instruction-counts.sh`.

let benchmarks: @Sendable () -> Void = {
    let perOperation = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .instructions],
        scalingFactor: .kilo,
        maxDuration: .seconds(2)
    )

    // MARK: addTask against a bare Task

    /// A benchmark that runs `body` with a new `ModelBench` and the sample's operation count.
    func modelBenchmark(_ name: String, _ body: @escaping @Sendable (ModelBench, Int) async -> Void) {
        Benchmark("Model: \(name) (x1000)", configuration: perOperation) { benchmark in
            await body(await ModelBench(), benchmark.scaledIterations.count)
        }
    }

    modelBenchmark("bare Task { await self.doThing() } + await") { model, count in
        await model.bareRoundTrips(count)
    }
    modelBenchmark("TaskStore.addTask { await self.doThing() } + await") { model, count in
        await model.storeRoundTrips(count)
    }
    modelBenchmark("bare Task { flag; await self.doThing(); flag } + await") { model, count in
        await model.bareFlaggedRoundTrips(count, flag: await ObservableFlag())
    }
    modelBenchmark("TaskStore.addTask { await self.doThing() } + await, store read") { model, count in
        blackHole(await model.readStoreOnce())
        await model.storeRoundTrips(count)
    }
    modelBenchmark("bare Task { await concurrentOperation() } + await") { model, count in
        await model.bareConcurrentRoundTrips(count)
    }
    modelBenchmark("TaskStore.addTask(operation: concurrentOperation) + await") { model, count in
        await model.storeConcurrentRoundTrips(count)
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
