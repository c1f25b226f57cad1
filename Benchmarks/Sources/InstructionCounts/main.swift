// Runs the seed's CoFuture workload `n` times for one peer, for `valgrind --tool=callgrind`,
// which counts instructions repeatably on a noisy machine. See `Benchmarks/instruction-counts.sh`,
// which subtracts a run with n = 0 (process start-up) and divides by n.
//
//   swift build -c release --product InstructionCounts
//   valgrind --tool=callgrind .build/release/InstructionCounts cofuture 10000
import Foundation
import NIOEmbedded
import OpenCombine
import SeedWorkloads

let arguments = CommandLine.arguments
guard arguments.count == 3, let iterations = Int(arguments[2]), iterations >= 0 else {
    print("usage: InstructionCounts cofuture|nio|opencombine ITERATIONS")
    exit(2)
}

switch arguments[1] {
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
    print("unknown peer \(arguments[1]); expected cofuture, nio or opencombine")
    exit(2)
}
