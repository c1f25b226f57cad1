// The CoFuture headline workload of the seed, once per peer: shared by the ordo-one benchmark
// (CoFutureBenchmarks) and the callgrind driver (InstructionCounts), so both measure the same code.
//
// One iteration: create a promise `p`; `a = p.map { $0 + 1 }`; two observers on `a`;
// `a.map { $0 + 1 }` with one observer; complete `p` with 0; then the same again on the now
// completed promise (`b = p.map { $0 + 1 }`, two observers, `b.map` with one observer).
// That is 5 futures, 4 transforms and 6 observer calls per iteration.
import NIOCore
import NIOEmbedded
import OpenCombine
import TaskKit

/// Keeps `value` alive and observed so the optimiser cannot delete the work producing it.
@_optimize(none)
public func consume<T>(_ value: T) {}

@inline(never)
public func coFutureIteration() {
    let p = CoPromise<Int>()
    let a = p.map { $0 + 1 }
    a.whenSuccess { consume($0) }
    a.whenSuccess { consume($0) }
    a.map { $0 + 1 }.whenSuccess { consume($0) }
    p.success(0)
    let b = p.map { $0 + 1 }
    b.whenSuccess { consume($0) }
    b.whenSuccess { consume($0) }
    b.map { $0 + 1 }.whenSuccess { consume($0) }
}

@inline(never)
public func nioIteration(on loop: EmbeddedEventLoop) {
    let p = loop.makePromise(of: Int.self)
    let a = p.futureResult.map { $0 + 1 }
    a.whenSuccess { consume($0) }
    a.whenSuccess { consume($0) }
    a.map { $0 + 1 }.whenSuccess { consume($0) }
    p.succeed(0)
    let b = p.futureResult.map { $0 + 1 }
    b.whenSuccess { consume($0) }
    b.whenSuccess { consume($0) }
    b.map { $0 + 1 }.whenSuccess { consume($0) }
}

@inline(never)
public func combineIteration(_ cancellables: inout [AnyCancellable]) {
    var fulfil: ((Result<Int, Never>) -> Void)?
    let p = Future<Int, Never> { fulfil = $0 }
    let a = p.map { $0 + 1 }
    a.sink { consume($0) }.store(in: &cancellables)
    a.sink { consume($0) }.store(in: &cancellables)
    a.map { $0 + 1 }.sink { consume($0) }.store(in: &cancellables)
    fulfil?(.success(0))
    let b = p.map { $0 + 1 }
    b.sink { consume($0) }.store(in: &cancellables)
    b.sink { consume($0) }.store(in: &cancellables)
    b.map { $0 + 1 }.sink { consume($0) }.store(in: &cancellables)
    cancellables.removeAll(keepingCapacity: true)
}
