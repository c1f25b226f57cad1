/// A read-only snapshot of what a ``MonoTask`` has done since it was created.
///
/// Taken atomically with respect to the task's state by ``MonoTask/counters``: every field
/// describes the same instant. The counters only grow.
public struct MonoTaskCounters: Sendable, Hashable, CustomStringConvertible {
    /// Runs started: first executions, `forceUpdate` follow-ups, restarts and background
    /// refreshes. Retries of a run are not counted here (see ``retries``).
    public internal(set) var executions: Int = 0
    /// Calls answered from the cache without executing.
    public internal(set) var cacheHits: Int = 0
    /// Calls that joined a run that existed already (or a requested follow-up run) instead of
    /// starting one. Fire-and-forget calls (`justExecute`) are not counted.
    public internal(set) var mergedCallers: Int = 0
    /// Retry attempts made after failed attempts.
    public internal(set) var retries: Int = 0
    /// Runs cancelled by `clearResult(ongoingExecutionStrategy: .cancel)`.
    public internal(set) var cancellations: Int = 0
    /// Async callers that left early because their own `Task` was cancelled.
    public internal(set) var callerCancellations: Int = 0

    @usableFromInline
    mutating func recordCacheHit() { cacheHits += 1 }

    @usableFromInline
    mutating func recordMergedCaller() { mergedCallers += 1 }

    /// Creates an all-zero snapshot.
    public init() {}

    /// A one-line summary, for logs.
    public var description: String {
        "executions=\(executions) cacheHits=\(cacheHits) mergedCallers=\(mergedCallers) "
            + "retries=\(retries) cancellations=\(cancellations) callerCancellations=\(callerCancellations)"
    }
}
