/// The keys of a batch-loading ``KeyedMonoTask`` whose loads have begun (their entries are
/// loading, so later callers join them) and that wait to be sent to the batch loader together.
///
/// Its state is behind its own lock, never taken together with a shard's. It decides when keys
/// go: at once when ``maximumBatchSize`` of them are waiting; otherwise the owner's dispatch task
/// takes them all (``takeAll()``) after the batch window, once the requesting tasks have
/// yielded and no key has arrived for the quiet period. While a ``KeyedMonoTask/values(for:)`` call registers its keys (a *hold*), nothing is
/// dispatched but full batches, so its missing keys go in as few calls as the size allows.
@usableFromInline
final class KeyedMonoTaskBatcher<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline typealias Machine = KeyedMonoTaskStateMachine<Key, Value, MonoWaiter<Value>>

    /// A key whose load began in the shard of index `shard`.
    @usableFromInline
    struct Item: Sendable {
        @usableFromInline let start: Machine.StartLoad
        @usableFromInline let shard: Int

        @usableFromInline
        init(start: Machine.StartLoad, shard: Int) {
            self.start = start
            self.shard = shard
        }
    }

    @usableFromInline
    struct State {
        @usableFromInline var pending: [Item] = []
        /// A dispatch task is scheduled and has not taken the pending keys yet.
        @usableFromInline var dispatchScheduled = false
        /// `values(for:)` calls registering their keys.
        @usableFromInline var holds = 0
        /// Calls made to the batch loader (retries not counted) and the keys they carried.
        @usableFromInline var batches = 0
        @usableFromInline var batchedKeys = 0
        /// Retries of whole batches.
        @usableFromInline var retries = 0

        @usableFromInline init() {}
    }

    /// What the owner does after ``enqueue(_:)`` or ``release()``.
    @usableFromInline
    enum Action {
        /// Nothing: a dispatch is scheduled already, or a hold defers it.
        case none
        /// Start the dispatch task (``takeAll()`` after the window and the yields).
        case scheduleDispatch
        /// Load these keys now: a full batch.
        case run([Item])
    }

    /// Loads a batch: the caller's loader.
    @usableFromInline let load: @Sendable ([Key]) async throws -> [Key: Value]
    /// The most keys in one call of ``load``.
    @usableFromInline let maximumBatchSize: Int
    /// How long the dispatch task waits, on the cache's clock, before taking the keys.
    @usableFromInline let window: Duration
    /// How long no new key must have arrived, in real time, before the dispatch task takes the
    /// keys (at most ten times this after it began); `.zero`: two quiet yields are enough.
    @usableFromInline let quietPeriod: Duration
    /// How a failed batch is retried (as a whole).
    @usableFromInline let retry: RetryCount
    @usableFromInline let state = LockedState(State())

    init(
        maximumBatchSize: Int, window: Duration, quietPeriod: Duration = .zero, retry: RetryCount,
        load: @escaping @Sendable ([Key]) async throws -> [Key: Value]
    ) {
        self.maximumBatchSize = maximumBatchSize
        self.window = window
        self.quietPeriod = quietPeriod
        self.retry = retry
        self.load = load
    }

    /// A key's load began: it waits for a batch.
    @inlinable
    func enqueue(_ item: Item) -> Action {
        state.withLock { state in
            state.pending.append(item)
            if state.pending.count >= maximumBatchSize {
                return .run(Self.take(maximumBatchSize, from: &state))
            }
            if state.dispatchScheduled || state.holds > 0 { return .none }
            state.dispatchScheduled = true
            return .scheduleDispatch
        }
    }

    /// A `values(for:)` call begins registering its keys.
    func hold() {
        state.withLock { $0.holds += 1 }
    }

    /// A `values(for:)` call registered its keys.
    func release() -> Action {
        state.withLock { state in
            state.holds -= 1
            guard state.holds == 0, !state.pending.isEmpty, !state.dispatchScheduled else { return .none }
            state.dispatchScheduled = true
            return .scheduleDispatch
        }
    }

    /// How many keys wait.
    @inlinable
    var pendingCount: Int {
        state.withLock { $0.pending.count }
    }

    /// The dispatch task takes every waiting key, in batches of at most ``maximumBatchSize``;
    /// none while a hold is on (its release schedules the next dispatch).
    @inlinable
    func takeAll() -> [[Item]] {
        state.withLock { state in
            state.dispatchScheduled = false
            guard state.holds == 0 else { return [] }
            var batches: [[Item]] = []
            while !state.pending.isEmpty {
                batches.append(Self.take(min(maximumBatchSize, state.pending.count), from: &state))
            }
            return batches
        }
    }

    /// A failed batch is retried.
    @inlinable
    func recordRetry() {
        state.withLock { $0.retries += 1 }
    }

    /// Batches, batched keys and batch retries so far.
    var counts: (batches: Int, keys: Int, retries: Int) {
        state.withLock { ($0.batches, $0.batchedKeys, $0.retries) }
    }

    @inlinable
    static func take(_ count: Int, from state: inout State) -> [Item] {
        let batch = Array(state.pending.prefix(count))
        state.pending.removeFirst(count)
        state.batches += 1
        state.batchedKeys += batch.count
        return batch
    }
}

/// The error a ``KeyedMonoTask`` with a batch loader delivers for a key that the loader was
/// asked for and left out of its result. Not cached: the next call for the key loads it again.
public struct KeyedMonoTaskKeyNotLoaded: Error, Sendable, CustomStringConvertible {
    /// The key the batch left out.
    public let key: any Hashable & Sendable

    /// Creates the error for `key`.
    public init(key: any Hashable & Sendable) {
        self.key = key
    }

    /// Names the key.
    public var description: String {
        "KeyedMonoTask: the batch loader returned no value for the key \(key)"
    }
}
