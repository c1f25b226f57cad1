// Paired workloads run on Swift's global executor with every worker it has.
//
// package-benchmark runs an async benchmark by blocking the thread that called it on a
// semaphore; that thread is one of the cooperative pool's, so on a 2-core Linux box an async
// benchmark runs on the one worker left (`perf stat`: 1.00 CPUs; gdb: a `default-qos` worker
// parked in `Benchmark.runAsync`). What runs on several cores in a server (readers on
// different cores, callers joining from both) runs on one there. This driver measures the
// same workloads without that: rounds of each contender interleaved in one process, the
// median per operation, the ratio of medians, and the CPUs the rounds used (process CPU
// time over wall time), which says whether they ran on more than one core.
//
//   swift run -c release ParallelPairs hit [rounds]        1/2/4/8 readers, 1,000,000 reads a round
//   swift run -c release ParallelPairs every-key [rounds]  1,000 keys x 100 concurrent callers
//   swift run -c release ParallelPairs fan-out [rounds]    1,000 keys through a batch loader
//   swift run -c release ParallelPairs taskmanager [rounds]      issue 37's TaskManager pairs
//   swift run -c release ParallelPairs monotask-merged [rounds]  100 callers merged into one run

import Foundation
import SeedWorkloads
import Synchronization
import TaskKit

// The hit workload's caches, in this module (see `HitWorkloads.swift`).
let hitCache = KeyedMonoTask<Int, Int>(maximumEntries: keyCount, resultExpireDuration: .seconds(3_600)) { $0 }
let naiveHitCache = NaiveKeyedCache { $0 }
/// The same cache with every cache policy of issue 51 on (a hit costs at most 1.2x one without).
let policyHitCache = KeyedMonoTask<Int, Int>(
    maximumEntries: keyCount, resultExpireDuration: .seconds(3_600), staleWhileRevalidate: .seconds(60),
    refreshAhead: .fraction(0.9), expiryJitter: .seconds(60), failSafe: FailSafe(maximumStaleness: .seconds(86_400)),
    expiry: { _, _ in nil }, failureExpiry: { _, _ in .seconds(30) }, tags: { key, _ in ["group:\(key % 10)"] },
    onRemoval: { _, _, _ in }
) { $0 }
/// How a server usually holds a cache: a `let` of a long-lived object, read from its methods.
final class UserService: Sendable {
    let cache: KeyedMonoTask<Int, Int>
    init(cache: KeyedMonoTask<Int, Int>) { self.cache = cache }
    func value(for key: Int) async -> Int { (try? await cache.value(for: key)) ?? 0 }
}
let service = UserService(cache: hitCache)
let lockedDictionary = Mutex<[Int: Int]>(Dictionary(uniqueKeysWithValues: (0..<keyCount).map { ($0, $0) }))

/// One contender: its name and one round, which returns how many operations it made.
struct Contender {
    let name: String
    let round: @Sendable () async -> Int
}

/// The wall time per operation of `body`, and the CPUs it used: the process's CPU time (all
/// threads) over the wall time.
func measured(_ body: () async -> Int) async -> (nanosPerOperation: Double, cpus: Double) {
    func processCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
    let cpuBefore = processCPUSeconds()
    let start = ContinuousClock.now
    let operations = await body()
    let wall = ContinuousClock.now - start
    let cpu = processCPUSeconds() - cpuBefore
    let wallSeconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18
    return (wallSeconds * 1e9 / Double(operations), cpu / wallSeconds)
}

/// A contender making `n` operations with `run`, which returns the sum 0 + 1 + … + (n - 1).
func summing(_ name: String, _ n: Int, _ run: @escaping @Sendable (Int) async -> Int) -> Contender {
    Contender(name: name) {
        let sum = await run(n)
        precondition(sum == n * (n - 1) / 2, "\(name): every operation ran once")
        return n
    }
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// Runs `rounds` interleaved rounds of every contender (after one warm-up round each) and prints
/// the medians, the first contender's ratio to each of the others, and the CPUs used.
func pair(_ title: String, unit: String, scale: Double, rounds: Int, _ contenders: [Contender]) async {
    for contender in contenders { _ = await contender.round() }
    var times = Array(repeating: [Double](), count: contenders.count)
    var cpus = Array(repeating: [Double](), count: contenders.count)
    for round in 0..<rounds {
        // Alternate the order, so that neither side always runs right after the other.
        let order = round % 2 == 0 ? Array(contenders.indices) : contenders.indices.reversed()
        for index in order {
            let result = await measured(contenders[index].round)
            times[index].append(result.nanosPerOperation / scale)
            cpus[index].append(result.cpus)
        }
    }
    let medians = times.map(median)
    print("## \(title) (\(rounds) rounds, median per \(unit))")
    for (index, contender) in contenders.enumerated() {
        let ratios = medians.indices.filter { $0 != index && index == 0 }.map {
            String(format: "%.2fx %@", medians[index] / medians[$0], contenders[$0].name)
        }
        let name = contender.name.padding(toLength: 34, withPad: " ", startingAt: 0)
        let line = name + String(format: "%10.1f  CPUs %.2f", medians[index], median(cpus[index]))
        print(ratios.isEmpty ? line : line + "  (" + ratios.joined(separator: ", ") + ")")
    }
    print("")
}

/// Loader calls per round, by contender.
final class LoaderCalls: Sendable {
    let counts = Mutex<[[Int: Int]]>([[:], [:], [:], [:], [:], [:]])
    func record(_ contender: Int, _ calls: Int) { counts.withLock { $0[contender][calls, default: 0] += 1 } }
    func histogram(_ contender: Int) -> String {
        counts.withLock { $0[contender] }.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")
    }
}
let loaderCalls = LoaderCalls()

let arguments = CommandLine.arguments.dropFirst()
let workload = arguments.first ?? "hit"
let roundsArgument = arguments.dropFirst().first.flatMap { Int($0) }

switch workload {
case "hit":
    await fillHitCaches(hitCache, naiveHitCache)
    _ = await policyHitCache.values(for: 0..<keyCount)
    let reads = 1_000_000
    for readers in [1, 2, 4, 8] {
        let perReader = reads / readers
        // Every cache maps a key to itself: the sum of the keys read, computed without a cache.
        let expected = await readInParallel(readers: readers, reads: perReader) { $0 }
        await pair("hit, 100,000 keys, \(readers) readers", unit: "read (ns)", scale: 1, rounds: roundsArgument ?? 15, [
            Contender(name: "KeyedMonoTask") {
                let sum = await readInParallel(readers: readers, reads: perReader) { key in (try? await hitCache.value(for: key)) ?? 0 }
                precondition(sum == expected, "every read found its key")
                return perReader * readers
            },
            Contender(name: "KeyedMonoTask, every policy on") {
                let sum = await readInParallel(readers: readers, reads: perReader) { key in (try? await policyHitCache.value(for: key)) ?? 0 }
                precondition(sum == expected, "every read found its key")
                return perReader * readers
            },
            Contender(name: "KeyedMonoTask in a service object") {
                let sum = await readInParallel(readers: readers, reads: perReader) { key in await service.value(for: key) }
                precondition(sum == expected, "every read found its key")
                return perReader * readers
            },
            Contender(name: "Baseline actor [Key: Task]") {
                let sum = await readInParallel(readers: readers, reads: perReader) { key in (try? await naiveHitCache.value(for: key)) ?? 0 }
                precondition(sum == expected, "every read found its key")
                return perReader * readers
            },
            Contender(name: "Floor Mutex<[Int: Int]>") {
                let sum = await readInParallel(readers: readers, reads: perReader) { key in lockedDictionary.withLock { $0[key] ?? 0 } }
                precondition(sum == expected, "every read found its key")
                return perReader * readers
            },
        ])
    }
case "every-key":
    await pair("1,000 keys x 100 concurrent callers", unit: "round of 100,000 callers (ms)", scale: 1e6 / Double(distinctKeys * callersPerKey), rounds: roundsArgument ?? 15, [
        Contender(name: "KeyedMonoTask") { await keyedMonoTaskEveryKeyRound(); return distinctKeys * callersPerKey },
        Contender(name: "Baseline actor [Key: Task]") { await actorEveryKeyRound(); return distinctKeys * callersPerKey },
    ])
case "fan-out":
    await pair("fan-out, 1,000 keys, batches of 100", unit: "key (ns)", scale: 1, rounds: roundsArgument ?? 200, [
        Contender(name: "KeyedMonoTask batched") { loaderCalls.record(0, await keyedMonoTaskBatchedFanOut()); return 1_000 },
        Contender(name: "Baseline hand-written DataLoader") { loaderCalls.record(1, await dataLoaderFanOut()); return 1_000 },
        Contender(name: "KeyedMonoTask, batchWindow 1 ms") {
            loaderCalls.record(2, await keyedMonoTaskBatchedFanOut(batchWindow: .milliseconds(1)))
            return 1_000
        },
        Contender(name: "hand-written DataLoader, cancellable callers") {
            loaderCalls.record(3, await dataLoaderFanOut(callers: .cancellable))
            return 1_000
        },
        Contender(name: "hand-written DataLoader, callers in a no-op cancellation handler") {
            loaderCalls.record(4, await dataLoaderFanOut(callers: .inCancellationHandler))
            return 1_000
        },
        // Before issue 51: the yields alone decide when a batch goes.
        Contender(name: "KeyedMonoTask, batchQuietPeriod .zero") {
            loaderCalls.record(5, await keyedMonoTaskBatchedFanOut(quietPeriod: .zero))
            return 1_000
        },
    ])
    print("loader calls per round of 1,000 keys (calls: rounds):")
    print("  KeyedMonoTask batched:", loaderCalls.histogram(0))
    print("  hand-written DataLoader:", loaderCalls.histogram(1))
    print("  KeyedMonoTask, batchWindow 1 ms:", loaderCalls.histogram(2))
    print("  hand-written DataLoader, cancellable callers:", loaderCalls.histogram(3))
    print("  hand-written DataLoader, callers in a no-op cancellation handler:", loaderCalls.histogram(4))
    print("  KeyedMonoTask, batchQuietPeriod .zero:", loaderCalls.histogram(5))
case "taskmanager":
    // Issue 37's bars, on every worker: TaskManager with one pass-through interceptor against a
    // task group over the same task objects.
    await pair("100,000 trivial tasks, one pass-through interceptor", unit: "task (ns)", scale: 1, rounds: roundsArgument ?? 15, [
        summing("TaskManager", 100_000, managerThroughput),
        summing("withTaskGroup", 100_000, taskGroupThroughput),
    ])
    await pair("value(of:) round trip, one pass-through interceptor", unit: "round trip (ns)", scale: 1, rounds: roundsArgument ?? 15, [
        summing("TaskManager value(of:)", 20_000, managerInterceptedRoundTrips),
        summing("TaskGroup addTask + next()", 20_000, taskGroupRoundTrips),
    ])
case "monotask-merged":
    // Issue 37's bar: 100 callers merged into one MonoTask run against the actor holding a Task.
    let batches = 100
    await pair("100 callers merged into one run", unit: "caller (ns)", scale: 1, rounds: roundsArgument ?? 15, [
        Contender(name: "MonoTask") {
            for _ in 0..<batches { await monoTaskMergedBatch() }
            return batches * callers
        },
        Contender(name: "actor holding a Task") {
            for _ in 0..<batches { await actorMergedBatch() }
            return batches * callers
        },
    ])
default:
    print("usage: ParallelPairs hit|every-key|fan-out|taskmanager|monotask-merged [rounds]")
    exit(2)
}
