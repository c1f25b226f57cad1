/// Where a managed task is in its life, as seen through its ``TaskHandle``.
///
/// - ``pending``: added but not executing: not started yet (`startImmediately: false`), waiting
///   for its `after:` delay, queued behind the concurrency limit or a suspended queue, being
///   intercepted, held in an interceptor's batch, or requeued by a reactor and waiting to run again.
/// - ``executing``: its execution runs, or its result is being examined by reactors, or it waits
///   for the reactions it triggered to finish.
/// - ``finished``: its completion has been (or is being) delivered. A cancelled, timed-out,
///   discarded or reactor-failed task is `finished` too; the caller learns which from the
///   ``TaskError`` in its completion.
public enum TaskState: Sendable, Hashable, CustomStringConvertible {
    /// Added, not executing yet.
    case pending
    /// Executing, or being reacted to.
    case executing
    /// Done, in whatever way (result, failure, or a ``TaskError``).
    case finished

    public var description: String {
        switch self {
        case .pending: return "pending"
        case .executing: return "executing"
        case .finished: return "finished"
        }
    }
}
