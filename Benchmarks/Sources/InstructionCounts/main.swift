// Runs the seed's CoFuture workload `n` times for one peer (or a TaskStore workload: see
// TaskStoreWorkloads.swift), for `valgrind --tool=callgrind`,
// which counts instructions repeatably on a noisy machine. See `Benchmarks/instruction-counts.sh`,
// which subtracts a run with n = 0 (process start-up) and divides by n.
//
//   swift build -c release --product InstructionCounts
//   valgrind --tool=callgrind .build/release/InstructionCounts cofuture 10000
import Dispatch
import Foundation
import NIOEmbedded
import OpenCombine
import SeedWorkloads

let arguments = CommandLine.arguments
let workloads = "cofuture, nio, opencombine, " + TaskStoreWorkload.allCases.map(\.rawValue).joined(separator: ", ")
guard arguments.count == 3, let iterations = Int(arguments[2]), iterations >= 0 else {
    print("usage: InstructionCounts WORKLOAD ITERATIONS; WORKLOAD is one of: \(workloads)")
    exit(2)
}

/// Runs a CoFuture workload (synchronous); `false` if `name` is not one.
func runCoFutureWorkload(_ name: String, _ iterations: Int) throws -> Bool {
    switch name {
    case "cofuture":
        for _ in 0..<iterations { coFutureIteration() }
    case "nio":
        let loop = EmbeddedEventLoop()
        for _ in 0..<iterations { nioIteration(on: loop) }
        try loop.syncShutdownGracefully()
    case "opencombine":
        var cancellables: [AnyCancellable] = []
        cancellables.reserveCapacity(8)
        for _ in 0..<iterations { combineIteration(&cancellables) }
    default:
        return false
    }
    return true
}

if try !runCoFutureWorkload(arguments[1], iterations) {
    guard let workload = TaskStoreWorkload(rawValue: arguments[1]) else {
        print("unknown workload \(arguments[1]); expected one of: \(workloads)")
        exit(2)
    }
    // Waited for on the main thread with a semaphore: under valgrind, an `async` top level
    // (which parks the main thread in dispatch's signal wait) crashes callgrind. Detached: a
    // plain `Task` here would inherit the main actor, which the waiting main thread holds.
    let finished = DispatchSemaphore(value: 0)
    Task.detached {
        await workload.run(iterations)
        finished.signal()
    }
    finished.wait()
}
