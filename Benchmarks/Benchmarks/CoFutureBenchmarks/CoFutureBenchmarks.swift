// The CoFuture headline workload, re-created from the seed, against two peers in the same run.
//
// One iteration: create a promise `p`; `a = p.map { $0 + 1 }`; two observers on `a`;
// `a.map { $0 + 1 }` with one observer; complete `p` with 0; then the same again on the now
// completed promise (`b = p.map { $0 + 1 }`, two observers, `b.map` with one observer).
// That is 5 futures, 4 transforms and 6 observer calls per iteration.
//
// Every sample runs the workload 10,000 times, so divide the reported figures by 10,000 for
// per-iteration numbers (README shows them divided).
import Benchmark
import Dispatch
import Foundation
import NIOEmbedded
import OpenCombine
import SeedWorkloads

let workloadIterations = 10_000
let lanes = max(2, ProcessInfo.processInfo.activeProcessorCount)

let metrics: [BenchmarkMetric] = [.wallClock, .cpuTotal, .mallocCountTotal, .instructions, .throughput]

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
}
