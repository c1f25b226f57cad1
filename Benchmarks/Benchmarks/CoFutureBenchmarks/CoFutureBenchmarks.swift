// The CoFuture headline workload, re-created from the seed, against two peers in the same run;
// then the contention workload, against NIO's thread-safe futures.
//
// Seed workload, one iteration: create a promise `p`; `a = p.map { $0 + 1 }`; two observers on
// `a`; `a.map { $0 + 1 }` with one observer; complete `p` with 0; then the same again on the now
// completed promise (`b = p.map { $0 + 1 }`, two observers, `b.map` with one observer).
// That is 5 futures, 4 transforms and 6 observer calls per iteration.
// Every sample runs the workload 10,000 times, so divide the reported figures by 10,000 for
// per-iteration numbers (README shows them divided).
//
// Contention workload (SeedWorkloads/ContentionWorkloads.swift), one sample = one round:
// 8 plain threads (more than the cores) are released together on 64 shared promises; each
// thread visits every promise, registering an observer and a chain of 3 `map`s with an observer
// on its tail, and completes (or, one promise in four, cancels through its tail) the promises it
// is designated for, halfway through the others' visits; for CoFuture a second thread races each
// completion. NIO (`EventLoopFuture` on a 2-loop `MultiThreadedEventLoopGroup`, used from the
// same 8 threads, hopping to the loops as it does) fails the promises CoFuture cancels. A round
// ends when all 1,024 observers have run: 64 promises, 1,536 `map` futures per round. The figure
// of merit is the wall time per round, its median (p50) and its slowest round (p100).
import Benchmark
import Dispatch
import Foundation
import NIOCore
import NIOEmbedded
import NIOPosix
import OpenCombine
import SeedWorkloads
import Synchronization

let workloadIterations = 10_000
let lanes = max(2, ProcessInfo.processInfo.activeProcessorCount)

let metrics: [BenchmarkMetric] = [.wallClock, .cpuTotal, .mallocCountTotal, .instructions, .throughput]

/// What a benchmark's setup starts and its teardown stops (worker threads, an event loop group),
/// so that benchmarks not selected in a run start nothing.
final class Started<Resources: Sendable>: Sendable {
    private let resources = Mutex<Resources?>(nil)

    func start(_ make: () -> Resources) {
        resources.withLock { $0 = make() }
    }

    var value: Resources {
        resources.withLock { $0! }
    }

    func stop() -> Resources? {
        resources.withLock { $0.take() }
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: metrics,
        timeUnits: .microseconds,
        warmupIterations: 3,
        scalingFactor: .one,
        maxDuration: .seconds(3),
        maxIterations: 200
    )

    // MARK: single-threaded

    Benchmark("CoFuture: seed workload x10k") { benchmark in
        for _ in 0..<workloadIterations { coFutureIteration() }
    }

    Benchmark("NIO EventLoopPromise (Embedded): seed workload x10k") { benchmark in
        let loop = EmbeddedEventLoop()
        benchmark.startMeasurement()
        for _ in 0..<workloadIterations { nioIteration(on: loop) }
        benchmark.stopMeasurement()
        try? loop.syncShutdownGracefully()
    }

    Benchmark("OpenCombine Future: seed workload x10k") { benchmark in
        var cancellables: [AnyCancellable] = []
        cancellables.reserveCapacity(8)
        for _ in 0..<workloadIterations { combineIteration(&cancellables) }
    }

    // MARK: concurrent, all cores (each lane runs its share of the 10k iterations)

    Benchmark("CoFuture: seed workload x10k, all cores") { benchmark in
        DispatchQueue.concurrentPerform(iterations: lanes) { _ in
            for _ in 0..<(workloadIterations / lanes) { coFutureIteration() }
        }
    }

    Benchmark("NIO EventLoopPromise (Embedded): seed workload x10k, all cores") { benchmark in
        DispatchQueue.concurrentPerform(iterations: lanes) { _ in
            let loop = EmbeddedEventLoop()
            for _ in 0..<(workloadIterations / lanes) { nioIteration(on: loop) }
            try? loop.syncShutdownGracefully()
        }
    }

    Benchmark("OpenCombine Future: seed workload x10k, all cores") { benchmark in
        DispatchQueue.concurrentPerform(iterations: lanes) { _ in
            var cancellables: [AnyCancellable] = []
            cancellables.reserveCapacity(8)
            for _ in 0..<(workloadIterations / lanes) { combineIteration(&cancellables) }
        }
    }

    // MARK: contention, 8 threads (one sample = one round)

    let contention = Benchmark.Configuration(
        metrics: metrics,
        timeUnits: .microseconds,
        warmupIterations: 10,
        scalingFactor: .one,
        maxDuration: .seconds(5),
        maxIterations: 1_000
    )

    let coFutureWorkers = Started<ContentionWorkers>()
    Benchmark(
        "CoFuture: contention, 8 threads",
        configuration: contention,
        closure: { _ in coFutureContentionRound(on: coFutureWorkers.value) },
        setup: { coFutureWorkers.start { ContentionWorkers() } },
        teardown: { coFutureWorkers.stop()?.stop() }
    )

    let nioPeer = Started<(workers: ContentionWorkers, group: MultiThreadedEventLoopGroup, loops: [any EventLoop])>()
    Benchmark(
        "NIO EventLoopFuture (MultiThreadedEventLoopGroup): contention, 8 threads",
        configuration: contention,
        closure: { _ in
            let peer = nioPeer.value
            nioContentionRound(on: peer.workers, loops: peer.loops)
        },
        setup: {
            nioPeer.start {
                let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
                return (ContentionWorkers(), group, Array(group.makeIterator()))
            }
        },
        teardown: {
            guard let peer = nioPeer.stop() else { return }
            peer.workers.stop()
            try await peer.group.shutdownGracefully()
        }
    )
}
