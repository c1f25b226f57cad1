// The merged-callers workloads of `MonoTaskBenchmarks`, shared with the callgrind driver
// (`InstructionCounts`, workloads `monotask-merged`, `actor-merged`, `gate-merged`): one batch
// of 100 task-group children asking at once for one execution that completes once all joined.
import BenchmarkSupport
import Synchronization
import TaskKit

/// 100 callers join one MonoTask execution, which completes once all have joined.
public func monoTaskMergedBatch() async {
    let gate = BenchGate()
    let task = MonoTask<Int>(resultExpireDuration: .zero) {
        await gate.wait()
        return .success(42)
    }
    await withTaskGroup(of: Int.self) { group in
        for _ in 0..<callers {
            group.addTask { (try? await task.executeThrows()) ?? -1 }
        }
        while task.counters.merges < callers - 1 { await Task.yield() }
        gate.open()
        var sum = 0
        for await value in group { sum += value }
        precondition(sum == 42 * callers, "every caller gets the one result")
    }
}

/// The same with the hand-written actor.
public func actorMergedBatch() async {
    let gate = BenchGate()
    let cache = NaiveSingleFlight(ttl: .zero) {
        await gate.wait()
        return 42
    }
    await withTaskGroup(of: Int.self) { group in
        for _ in 0..<callers {
            group.addTask { (try? await cache.value()) ?? -1 }
        }
        while await cache.joined < callers - 1 { await Task.yield() }
        gate.open()
        var sum = 0
        for await value in group { sum += value }
        precondition(sum == 42 * callers, "every caller gets the one result")
    }
}

/// Callers per merged batch.
public let callers = 100

/// The single-flight cache as commonly written by hand: an actor with the cached value and the
/// in-flight `Task`. Correct for this workload (no cancellation, retry or cache control).
public actor NaiveSingleFlight {
    private var cached: (value: Int, storedAt: ContinuousClock.Instant)?
    private var inFlight: Task<Int, any Error>?
    private let ttl: Duration
    private let work: @Sendable () async throws -> Int
    /// Callers that joined an in-flight task (for the benchmark's barrier).
    public private(set) var joined = 0

    public init(ttl: Duration, work: @escaping @Sendable () async throws -> Int) {
        self.ttl = ttl
        self.work = work
    }

    public func value() async throws -> Int {
        if let cached, cached.storedAt.duration(to: .now) < ttl {
            return cached.value
        }
        if let inFlight {
            joined += 1
            return try await inFlight.value
        }
        let task = Task { try await work() }
        inFlight = task
        defer { inFlight = nil }
        let value = try await task.value
        cached = (value, .now)
        return value
    }
}

/// How many children of ``gateMergedBatch()`` reached the gate.
private final class JoinCount: Sendable {
    let value = Atomic<Int>(0)
}

/// The floor of a merged batch: 100 task-group children that each wait for one gate (a lock and a
/// continuation, no cancellation handler, no cache, no execution) and return 42 once it opens.
public func gateMergedBatch() async {
    let gate = BenchGate()
    let joined = JoinCount()
    await withTaskGroup(of: Int.self) { group in
        for _ in 0..<callers {
            group.addTask {
                joined.value.add(1, ordering: .relaxed)
                await gate.wait()
                return 42
            }
        }
        while joined.value.load(ordering: .relaxed) < callers { await Task.yield() }
        gate.open()
        var sum = 0
        for await value in group { sum += value }
        precondition(sum == 42 * callers, "every caller gets the one result")
    }
}

/// 100 callers join one `KeyedMonoTask` load of one key, which completes once all have joined
/// (issue 35's "1,000 keys x 100 callers", one key of it).
public func keyedMonoTaskMergedBatch() async {
    let gate = BenchGate()
    let cache = KeyedMonoTask<Int, Int>(maximumEntries: 1_000) { key in
        await gate.wait()
        return key
    }
    await withTaskGroup(of: Int.self) { group in
        for _ in 0..<callers {
            group.addTask { (try? await cache.value(for: 42)) ?? -1 }
        }
        while cache.counters.merges < callers - 1 { await Task.yield() }
        gate.open()
        var sum = 0
        for await value in group { sum += value }
        precondition(sum == 42 * callers, "every caller gets the one result")
    }
}
