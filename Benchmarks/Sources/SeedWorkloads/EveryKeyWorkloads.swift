// The "1,000 keys x 100 concurrent callers" workload of `KeyedMonoTaskBenchmarks` (issue 35), shared
// with `ParallelPairs` (`every-key`) and `InstructionCounts` (`keyedmonotask-every-key`,
// `actor-every-key`): one round is 100,000
// callers, 100 per key; each key is loaded once, after every other caller has joined.

import BenchmarkSupport
import TaskKit

/// One round through a new `KeyedMonoTask`.
public func keyedMonoTaskEveryKeyRound() async {
    let gate = BenchGate()
    let cache = KeyedMonoTask<Int, Int>(maximumEntries: distinctKeys, resultExpireDuration: .seconds(60)) { key in
        await gate.wait()
        return key
    }
    let sum = await callEveryKey(
        { key in (try? await cache.value(for: key)) ?? -1 },
        allJoined: { cache.counters.merges == distinctKeys * (callersPerKey - 1) },
        open: gate.open
    )
    precondition(sum == expectedSum, "every caller gets its key's value")
    precondition(cache.counters.loads == distinctKeys, "every key loaded once")
}

/// One round through a new ``NaiveKeyedCache``.
public func actorEveryKeyRound() async {
    let gate = BenchGate()
    let cache = NaiveKeyedCache { key in
        await gate.wait()
        return key
    }
    let sum = await callEveryKey(
        { key in (try? await cache.value(for: key)) ?? -1 },
        allJoined: { await cache.calls == distinctKeys * callersPerKey },
        open: gate.open
    )
    precondition(sum == expectedSum, "every caller gets its key's value")
    let loads = await cache.loads
    precondition(loads == distinctKeys, "every key loaded once")
}

public let distinctKeys = 1_000
public let callersPerKey = 100
public let expectedSum = (0..<distinctKeys).reduce(0, +) * callersPerKey

/// 100 child tasks (one per caller round), each with 1,000 children (one per key): 100,000
/// concurrent callers, 100 per key. Nested rather than one group of 100,000 children, because
/// the runtime removes a finished child from its parent's record list by walking it, which is
/// quadratic in a group that large (10 s per sample for either cache). Opens the gate once
/// `allJoined` holds; returns the sum of the values.
public func callEveryKey(
    _ call: @escaping @Sendable (Int) async -> Int,
    allJoined: @Sendable () async -> Bool,
    open: () -> Void
) async -> Int {
    await withTaskGroup(of: Int.self) { rounds in
        for _ in 0..<callersPerKey {
            rounds.addTask {
                await withTaskGroup(of: Int.self) { callers in
                    for key in 0..<distinctKeys {
                        callers.addTask { await call(key) }
                    }
                    return await callers.reduce(0, +)
                }
            }
        }
        while await !allJoined() { await Task.yield() }
        open()
        return await rounds.reduce(0, +)
    }
}

/// The keyed single-flight cache as commonly written by hand: an actor with one `Task` per key,
/// kept forever. Correct for these workloads (no expiry, bound, invalidation or cancellation).
public actor NaiveKeyedCache {
    private var tasks: [Int: Task<Int, any Error>] = [:]
    private let load: @Sendable (Int) async throws -> Int
    /// Calls that reached the actor (for the benchmark's barrier) and loads started.
    public private(set) var calls = 0
    public private(set) var loads = 0

    public init(load: @escaping @Sendable (Int) async throws -> Int) {
        self.load = load
    }

    public var count: Int { tasks.count }

    public func value(for key: Int) async throws -> Int {
        calls += 1
        if let task = tasks[key] {
            return try await task.value
        }
        loads += 1
        let load = load
        let task = Task { try await load(key) }
        tasks[key] = task
        return try await task.value
    }
}
