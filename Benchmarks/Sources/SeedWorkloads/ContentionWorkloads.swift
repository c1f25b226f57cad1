// The contention workload: 8 threads (more than this machine's 2 cores) at once observing,
// deriving `map` chains from, completing and cancelling the same futures. Shared by the CoFuture
// and NIO peers of CoFutureBenchmarks, so both do the same work.
//
// One round: the benchmark thread creates 64 promises; 8 worker threads are released together
// and each visits all 64 (thread t starts at promise 8t and wraps around). A visit registers an
// observer on the promise, derives a chain of 3 `map`s from it and registers an observer on the
// chain's tail. At visits 32–39 of its round a thread completes the promise it has just visited,
// so every promise has one designated completer, halfway through the other threads' visits
// (roughly half of the observers are registered before the completion, half after). One promise
// in four is cancelled instead: CoFuture cancels the chain tail just derived (`cancel()` runs up
// the chain to the promise, and the cancellation flows down to every other observer and chain);
// NIO has no cancellation and fails the promise instead. For CoFuture a second thread races the
// designated one at its visits 40–47 (another `success`, or `cancel()` on its own tail); the
// first completion wins. NIO's promise is completed only by the designated thread.
// The round ends when all 1,024 observers have run (8 threads × 64 promises × 2) and every
// worker has finished its visits: 64 promises, 1,536 `map` futures and 1,024 observer calls.
//
// NIO's promises are made on the loops of a `MultiThreadedEventLoopGroup` (promise i on loop
// i mod the loop count) and used from the worker threads, as they come: every registration and
// completion from a worker hops to the promise's loop, and the observers run there.
import Dispatch
import Foundation
import NIOCore
import Synchronization
import TaskKit

/// The shape of the contention workload.
public enum Contention {
    /// Worker threads; more than the cores of the machine the figures come from (2).
    public static let threads = 8
    /// Shared promises per round; every thread visits each of them once.
    public static let promises = 64
    /// `map`s per derived chain.
    public static let chainLength = 3
    /// Observer calls per round: one on the promise and one on the chain tail, per visit.
    public static let observersPerRound = threads * promises * 2
    /// How long a round may take before the benchmark traps (instead of hanging).
    static let deadlineSeconds = 30

    /// The promise that thread `thread` visits at its visit `step` (0..<promises).
    static func promise(thread: Int, step: Int) -> Int {
        (thread * (promises / threads) + step) % promises
    }

    /// Whether the thread at visit `step` is the promise's designated completer: visits 32–39,
    /// which give each promise exactly one such thread.
    static func completes(step: Int) -> Bool {
        step >= promises / 2 && step < promises / 2 + promises / threads
    }

    /// Whether the thread at visit `step` races the designated completer (CoFuture only):
    /// visits 40–47, again exactly one thread per promise (the designated one's predecessor).
    static func races(step: Int) -> Bool {
        step >= promises / 2 + promises / threads && step < promises / 2 + 2 * (promises / threads)
    }

    /// Whether promise `index` is cancelled (NIO: failed) rather than completed with a value.
    static func isCanceled(_ index: Int) -> Bool {
        index % 4 == 3
    }
}

/// The error NIO's cancelled promises fail with (NIO has no cancellation).
struct ContentionCancellation: Error {}

/// One round's count of observers still to run, and the wait for it.
final class ContentionRound: Sendable {
    private let remaining = Atomic<Int>(Contention.observersPerRound)
    private let done = DispatchSemaphore(value: 0)

    /// Called by every observer.
    func observed() {
        let left = remaining.wrappingSubtract(1, ordering: .acquiringAndReleasing).newValue
        if left == 0 {
            done.signal()
        } else if left < 0 {
            fatalError("contention round: an observer ran twice")
        }
    }

    /// Returns once every observer has run; traps after the deadline.
    func waitForObservers() {
        if done.wait(timeout: .now() + .seconds(Contention.deadlineSeconds)) == .timedOut {
            let left = remaining.load(ordering: .acquiring)
            fatalError("contention round: \(left) observers had not run after \(Contention.deadlineSeconds) s")
        }
    }
}

/// `Contention.threads` plain threads (`Thread`), started once and reused by every round: each
/// round hands them a job, releases them together, and waits for all of them to return.
public final class ContentionWorkers: @unchecked Sendable {
    // @unchecked: every `var` is guarded by `condition`.
    private let condition = NSCondition()
    private var generation = 0
    private var job: (@Sendable (Int) -> Void)?
    private var running = 0
    private var stopping = false
    private let exited = DispatchSemaphore(value: 0)
    private let count: Int

    /// Starts `threads` worker threads.
    public init(threads: Int = Contention.threads) {
        count = threads
        for index in 0..<threads {
            let thread = Thread { [self] in work(index) }
            thread.name = "contention-\(index)"
            thread.start()
        }
    }

    private func work(_ index: Int) {
        var seen = 0
        while true {
            condition.lock()
            while generation == seen && !stopping {
                condition.wait()
            }
            if stopping {
                condition.unlock()
                exited.signal()
                return
            }
            seen = generation
            let job = job!
            condition.unlock()

            job(index)

            condition.lock()
            running -= 1
            if running == 0 { condition.broadcast() }
            condition.unlock()
        }
    }

    /// Runs `job(index)` on every worker at once (index 0..<threads) and returns when all have
    /// returned; traps after the deadline.
    public func run(_ job: @escaping @Sendable (Int) -> Void) {
        condition.lock()
        precondition(running == 0 && !stopping, "ContentionWorkers: one round at a time, before stop()")
        self.job = job
        running = count
        generation += 1
        condition.broadcast()
        let deadline = Date(timeIntervalSinceNow: TimeInterval(Contention.deadlineSeconds))
        while running > 0 {
            if !condition.wait(until: deadline), running > 0 {
                fatalError("contention round: \(running) of \(count) workers had not finished after \(Contention.deadlineSeconds) s")
            }
        }
        self.job = nil
        condition.unlock()
    }

    /// Stops the threads and waits for them to exit; traps after the deadline.
    public func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
        for _ in 0..<count {
            if exited.wait(timeout: .now() + .seconds(Contention.deadlineSeconds)) == .timedOut {
                fatalError("ContentionWorkers: a worker thread did not exit")
            }
        }
    }
}

// MARK: - CoFuture

/// One thread's visits in a CoFuture round.
@inline(never)
func coFutureContentionVisits(thread: Int, promises: [CoPromise<Int>], round: ContentionRound) {
    for step in 0..<Contention.promises {
        let index = Contention.promise(thread: thread, step: step)
        let promise = promises[index]
        promise.whenComplete { _ in round.observed() }
        var tail = promise.map { $0 + 1 }
        for _ in 1..<Contention.chainLength {
            tail = tail.map { $0 + 1 }
        }
        tail.whenComplete { _ in round.observed() }
        if Contention.completes(step: step) || Contention.races(step: step) {
            if Contention.isCanceled(index) {
                tail.cancel()
            } else {
                promise.success(index)
            }
        }
    }
}

/// One round of the contention workload for CoFuture on `workers`.
@inline(never)
public func coFutureContentionRound(on workers: ContentionWorkers) {
    let promises = (0..<Contention.promises).map { _ in CoPromise<Int>() }
    let round = ContentionRound()
    workers.run { thread in
        coFutureContentionVisits(thread: thread, promises: promises, round: round)
    }
    round.waitForObservers()
}

// MARK: - NIO

/// One thread's visits in a NIO round.
@inline(never)
func nioContentionVisits(thread: Int, promises: [EventLoopPromise<Int>], round: ContentionRound) {
    for step in 0..<Contention.promises {
        let index = Contention.promise(thread: thread, step: step)
        let promise = promises[index]
        promise.futureResult.whenComplete { _ in round.observed() }
        var tail = promise.futureResult.map { $0 + 1 }
        for _ in 1..<Contention.chainLength {
            tail = tail.map { $0 + 1 }
        }
        tail.whenComplete { _ in round.observed() }
        if Contention.completes(step: step) {
            if Contention.isCanceled(index) {
                promise.fail(ContentionCancellation())
            } else {
                promise.succeed(index)
            }
        }
    }
}

/// One round of the contention workload for NIO: promise i is made on `loops[i % loops.count]`
/// and used from `workers`.
@inline(never)
public func nioContentionRound(on workers: ContentionWorkers, loops: [any EventLoop]) {
    let promises = (0..<Contention.promises).map { loops[$0 % loops.count].makePromise(of: Int.self) }
    let round = ContentionRound()
    workers.run { thread in
        nioContentionVisits(thread: thread, promises: promises, round: round)
    }
    round.waitForObservers()
}
