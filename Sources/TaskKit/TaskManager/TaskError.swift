/// Why a managed task ended without a result of its own.
///
/// Every termination that ``TaskManager`` itself decides is reported with one of these cases:
/// the task's ``ManagedTask/didCancel(with:)`` runs first, then the caller's completion receives
/// `.failure(TaskError…)` exactly once. Errors thrown by the task's own execution, or by an
/// ``Interceptor/adapt(task:)`` step, reach the caller unchanged instead.
public enum TaskError: Error, Sendable, CustomStringConvertible {
    /// The task was cancelled through its ``TaskHandle/cancel()``, or the Swift task awaiting
    /// ``TaskManager/value(of:after:timeout:)`` was cancelled.
    case cancelled
    /// The task's deadline (the `timeout:` given to ``TaskManager/add(task:startImmediately:after:timeout:completeOn:completion:)``,
    /// or else ``ManagedTask/timeout``) passed before it produced a result.
    case timedOut
    /// An ``Interceptor`` returned ``InterceptCommand/discard`` for the task.
    case discarded
    /// The task had been requeued by a reactor whose execution failed with `error`.
    case reactorFailed(type: any Reactor.Type, error: any Error)
    /// The task had been requeued by a reactor whose execution exceeded
    /// ``ReactorConfiguration/timeout``.
    case reactorTimedOut(type: any Reactor.Type)
    /// The task was added after ``TaskManager/shutDown()`` began (for example after a
    /// swift-service-lifecycle graceful shutdown): the manager refuses new tasks.
    case shuttingDown

    public var description: String {
        switch self {
        case .cancelled: return "TaskError.cancelled"
        case .timedOut: return "TaskError.timedOut"
        case .discarded: return "TaskError.discarded"
        case .reactorFailed(let type, let error): return "TaskError.reactorFailed(type: \(type), error: \(error))"
        case .reactorTimedOut(let type): return "TaskError.reactorTimedOut(type: \(type))"
        case .shuttingDown: return "TaskError.shuttingDown"
        }
    }
}
