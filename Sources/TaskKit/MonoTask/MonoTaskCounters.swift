/// A read-only snapshot of what a ``MonoTask`` has done since it was created.
///
/// Taken atomically with respect to the task's state by ``MonoTask/counters``: every field
/// describes the same instant. The counters only grow. The shared ones have the names of
/// ``KeyedMonoTaskCounters``.
public struct MonoTaskCounters: Sendable, Hashable, CustomStringConvertible {
    /// Calls answered from the cache without executing.
    public internal(set) var hits: Int = 0
    /// Calls answered at once with a failure the task kept (negative caching, `failureExpiry`);
    /// not counted in ``hits``.
    public internal(set) var negativeHits: Int = 0
    /// Callers of a failed reload answered with the expired value instead of the error (a
    /// ``FailSafe``); also counted where they arrived (``merges``, or the load they started).
    public internal(set) var failSafeHits: Int = 0
    /// Callers answered with an expired value because its reload took longer than the
    /// fail-safe's soft timeout (``FailSafe/softTimeout``); also counted where they arrived.
    public internal(set) var softTimeouts: Int = 0
    /// Hits that started a background reload of a value due for a refresh (``RefreshAhead``);
    /// also counted in ``hits`` and ``loads``.
    public internal(set) var refreshesAhead: Int = 0
    /// Calls that joined a load that existed already (or a requested follow-up load) instead of
    /// starting one. Fire-and-forget calls (`justExecute`) are not counted.
    public internal(set) var merges: Int = 0
    /// Loads started: first executions, `forceUpdate` follow-ups, restarts and background
    /// refreshes. Retries of a load are not counted here (see ``retries``).
    public internal(set) var loads: Int = 0
    /// Retry attempts made after failed attempts.
    public internal(set) var retries: Int = 0
    /// Loads cancelled by `clearResult(ongoingExecutionStrategy: .cancel)`.
    public internal(set) var cancellations: Int = 0
    /// Async callers that left early because their own `Task` was cancelled.
    public internal(set) var callerCancellations: Int = 0

    @usableFromInline
    mutating func recordHit() { hits += 1 }

    @usableFromInline
    mutating func recordMerge() { merges += 1 }

    @usableFromInline
    mutating func recordRefreshAhead() { refreshesAhead += 1 }

    /// An all-zero snapshot: the library makes the counters, a caller reads them.
    @usableFromInline init() {}

    /// A one-line summary, for logs.
    public var description: String {
        "hits=\(hits) negativeHits=\(negativeHits) failSafeHits=\(failSafeHits) softTimeouts=\(softTimeouts) refreshesAhead=\(refreshesAhead) merges=\(merges) loads=\(loads) "
            + "retries=\(retries) cancellations=\(cancellations) callerCancellations=\(callerCancellations)"
    }
}
