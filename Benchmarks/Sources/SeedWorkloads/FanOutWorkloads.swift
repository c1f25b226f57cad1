// The fan-out workloads of `KeyedMonoTaskBenchmarks` (issue 36), shared with the callgrind driver
// (`InstructionCounts`, workloads `keyedmonotask-fanout-batched`, `dataloader-fanout`): 1,000
// task-group children ask at once for 1,000 distinct keys of a new, empty cache, whose loader
// calls a simulated backend that costs a fixed amount of CPU work per call.
import Synchronization
import TaskKit

/// Keys per fan-out round, one caller each.
public let fanOutKeys = 1_000
/// The most keys in one call of the batch loader.
public let fanOutBatchSize = 100
/// The most loader calls one round may make with batching: ceil(1,000 / 100).
public let fanOutMaximumBatchedCalls = (fanOutKeys + fanOutBatchSize - 1) / fanOutBatchSize

/// A backend whose every call costs the same CPU work, whatever its key count (a query's fixed
/// cost: parsing, planning, a round trip's processing), plus building the answer. Counts its calls.
public final class FanOutBackend: Sendable {
    private let callCount = Atomic<Int>(0)
    private let keyCount = Atomic<Int>(0)

    public init() {}

    /// The calls made and the keys they carried.
    public var calls: Int { callCount.load(ordering: .relaxed) }
    public var keys: Int { keyCount.load(ordering: .relaxed) }

    /// Answers `keys` (each key's value is the key) after the per-call work.
    public func load(_ keys: [Int]) -> [Int: Int] {
        callCount.add(1, ordering: .relaxed)
        keyCount.add(keys.count, ordering: .relaxed)
        fanOutCallWork()
        var values: [Int: Int] = [:]
        values.reserveCapacity(keys.count)
        for key in keys { values[key] = key }
        return values
    }
}

/// Iterations of the per-call work: about 10k instructions, 8–13 µs on the benchmark machine.
public let fanOutCallWorkIterations = 20_000

/// The backend's fixed cost per call: a dependent chain of multiplications that the optimiser
/// cannot drop (its result is published through an atomic).
@inline(never)
func fanOutCallWork() {
    var x: UInt64 = 0x9E37_79B9_7F4A_7C15
    for _ in 0..<fanOutCallWorkIterations {
        x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
    }
    fanOutSink.store(x, ordering: .relaxed)
}

let fanOutSink = Atomic<UInt64>(0)

/// Asks for every key `0..<fanOutKeys` at once, one task-group child per key; returns the sum of
/// the values (checked by the callers).
public func fanOut(_ value: @escaping @Sendable (Int) async -> Int) async -> Int {
    await withTaskGroup(of: Int.self) { group in
        for key in 0..<fanOutKeys {
            group.addTask { await value(key) }
        }
        return await group.reduce(0, +)
    }
}

/// The sum every fan-out round must return.
public let fanOutExpectedSum = (0..<fanOutKeys).reduce(0, +)

/// One round through a new `KeyedMonoTask` with a batch loader (batches of `fanOutBatchSize`);
/// returns the backend calls made.
public func keyedMonoTaskBatchedFanOut(
    batchWindow: Duration = .zero, quietPeriod: Duration = .microseconds(100)
) async -> Int {
    let backend = FanOutBackend()
    let cache = KeyedMonoTask<Int, Int>(
        maximumEntries: fanOutKeys, resultExpireDuration: .seconds(60), maximumBatchSize: fanOutBatchSize,
        batchWindow: batchWindow, batchQuietPeriod: quietPeriod
    ) { keys in
        backend.load(keys)
    }
    let sum = await fanOut { key in (try? await cache.value(for: key)) ?? -1 }
    precondition(sum == fanOutExpectedSum, "every caller gets its key's value")
    precondition(backend.keys == fanOutKeys, "every key loaded once")
    precondition(cache.counters.batches == backend.calls, "the counter counts the calls")
    return backend.calls
}

/// One round through a new `KeyedMonoTask` with a loader of one key; returns the backend calls.
public func keyedMonoTaskSingleFanOut() async -> Int {
    let backend = FanOutBackend()
    let cache = KeyedMonoTask<Int, Int>(maximumEntries: fanOutKeys, resultExpireDuration: .seconds(60)) { key in
        backend.load([key])[key]!
    }
    let sum = await fanOut { key in (try? await cache.value(for: key)) ?? -1 }
    precondition(sum == fanOutExpectedSum, "every caller gets its key's value")
    precondition(backend.calls == fanOutKeys, "every key loaded once")
    return backend.calls
}

/// How the callers of a ``DataLoader`` fan-out round wait.
public enum DataLoaderCallers: Sendable {
    /// ``DataLoader/value(for:)``: a caller cannot leave before its value.
    case plain
    /// ``DataLoader/valueInCancellationHandler(for:)``: as `plain`, inside a cancellation handler
    /// that does nothing, the runtime's part of letting a caller leave (its callers still cannot).
    case inCancellationHandler
    /// ``DataLoader/cancellableValue(for:)``: a caller leaves at once when cancelled, what
    /// `KeyedMonoTask` offers every caller.
    case cancellable
}

/// One round through a new hand-written `DataLoader`, its callers waiting as `callers` says;
/// returns the backend calls.
public func dataLoaderFanOut(callers: DataLoaderCallers = .plain) async -> Int {
    let backend = FanOutBackend()
    let loader = DataLoader(maximumBatchSize: fanOutBatchSize) { keys in backend.load(keys) }
    let sum: Int
    switch callers {
    case .plain:
        sum = await fanOut { key in (try? await loader.value(for: key)) ?? -1 }
    case .inCancellationHandler:
        sum = await fanOut { key in (try? await loader.valueInCancellationHandler(for: key)) ?? -1 }
    case .cancellable:
        sum = await fanOut { key in (try? await loader.cancellableValue(for: key)) ?? -1 }
    }
    precondition(sum == fanOutExpectedSum, "every caller gets its key's value")
    precondition(backend.keys == fanOutKeys, "every key loaded once")
    return backend.calls
}

/// The batching loader as commonly written by hand (the DataLoader pattern): an actor collects
/// the keys asked for and their callers' continuations; the first key schedules one flush task,
/// which yields once (so that the callers running now can add their keys), then takes every
/// collected key and calls the batch function in chunks of at most `maximumBatchSize`, each
/// chunk in a task of its own, resuming the callers with their values. A key asked for again
/// before its flush joins it. No cache, no expiry: all the fan-out needs. Callers of
/// ``value(for:)`` cannot leave before their value; ``cancellableValue(for:)`` is the same wait
/// written to end at once when the caller's task is cancelled.
public actor DataLoader {
    public typealias BatchLoad = @Sendable ([Int]) async throws -> [Int: Int]

    /// A caller waiting for its key: its continuation, or the slot of a cancellable caller.
    private enum Caller: Sendable {
        case plain(CheckedContinuation<Int, any Error>)
        case cancellable(DataLoaderWaiter)

        func resume(with result: Result<Int, any Error>) {
            switch self {
            case .plain(let continuation): continuation.resume(with: result)
            case .cancellable(let waiter): waiter.resume(with: result)
            }
        }
    }

    private typealias Callers = [Caller]

    private let maximumBatchSize: Int
    private let batchLoad: BatchLoad
    /// The keys waiting for the next flush, in the order first asked, and their callers.
    private var keys: [Int] = []
    private var callers: [Int: Callers] = [:]
    private var flushScheduled = false

    public init(maximumBatchSize: Int, batchLoad: @escaping BatchLoad) {
        self.maximumBatchSize = maximumBatchSize
        self.batchLoad = batchLoad
    }

    /// The value of `key`, loaded in the batch of the next flush.
    public func value(for key: Int) async throws -> Int {
        try await withCheckedThrowingContinuation { continuation in
            register(.plain(continuation), for: key)
        }
    }

    /// ``value(for:)`` for a caller that leaves with `CancellationError` as soon as its task is
    /// cancelled; the batch goes on for the others. The usual hand-written way: a slot per caller
    /// that the batch and the cancellation handler race to take.
    public func cancellableValue(for key: Int) async throws -> Int {
        let waiter = DataLoaderWaiter()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                waiter.store(continuation)
                register(.cancellable(waiter), for: key)
            }
        } onCancel: {
            waiter.cancel()
        }
    }

    /// ``value(for:)`` inside a cancellation handler that does nothing: what the runtime charges
    /// any caller that could leave when cancelled (a status record on its task, the executor
    /// hops of `withTaskCancellationHandler`), without the leaving itself.
    public nonisolated func valueInCancellationHandler(for key: Int) async throws -> Int {
        try await withTaskCancellationHandler {
            try await self.value(for: key)
        } onCancel: {}
    }

    private func register(_ caller: Caller, for key: Int) {
        if callers[key] != nil {
            callers[key]!.append(caller)
            return
        }
        callers[key] = [caller]
        keys.append(key)
        if !flushScheduled {
            flushScheduled = true
            Task { await self.flush() }
        }
    }

    private func flush() async {
        await Task.yield()
        let keys = self.keys
        let callers = self.callers
        self.keys = []
        self.callers = [:]
        flushScheduled = false
        let batchLoad = batchLoad
        var start = 0
        while start < keys.count {
            let end = min(start + maximumBatchSize, keys.count)
            let chunk = Array(keys[start..<end])
            let chunkCallers = chunk.map { callers[$0]! }
            Task.detached {
                let result: Result<[Int: Int], any Error>
                do {
                    result = .success(try await batchLoad(chunk))
                } catch {
                    result = .failure(error)
                }
                for (key, continuations) in zip(chunk, chunkCallers) {
                    let value = result.flatMap { values in
                        values[key].map(Result.success) ?? .failure(DataLoaderKeyMissing(key: key))
                    }
                    for caller in continuations { caller.resume(with: value) }
                }
            }
            start = end
        }
    }
}

/// The wait of one cancellable ``DataLoader`` caller: whoever takes the continuation first (the
/// batch, or the caller's cancellation) resumes it.
final class DataLoaderWaiter: Sendable {
    private let slot = Mutex<(continuation: CheckedContinuation<Int, any Error>?, cancelled: Bool)>((nil, false))

    /// Stores the caller's continuation; resumes it at once if the caller was cancelled first.
    func store(_ continuation: CheckedContinuation<Int, any Error>) {
        let cancelled = slot.withLock { slot in
            if slot.cancelled { return true }
            slot.continuation = continuation
            return false
        }
        if cancelled { continuation.resume(throwing: CancellationError()) }
    }

    /// Resumes the caller with `result`, unless it was resumed already.
    func resume(with result: Result<Int, any Error>) {
        slot.withLock { $0.continuation.take() }?.resume(with: result)
    }

    /// The caller's task was cancelled: it leaves now (or as soon as its continuation is stored).
    func cancel() {
        slot.withLock { slot -> CheckedContinuation<Int, any Error>? in
            slot.cancelled = true
            return slot.continuation.take()
        }?.resume(throwing: CancellationError())
    }
}

/// The batch function of a ``DataLoader`` returned no value for `key`.
public struct DataLoaderKeyMissing: Error {
    public let key: Int
}
