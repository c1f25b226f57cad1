/// Sees every task before a ``TaskManager`` executes it, may change it, and decides whether it
/// executes now, waits in a batch, or is dropped.
///
/// Interceptors are given to the manager at creation. Interception is serialised per manager:
/// ``intercept(task:currentBatchCount:)`` is never called concurrently for the same manager, so
/// `currentBatchCount` is exact. It runs outside the manager's lock, synchronously, on whichever
/// thread moved the task forward (the caller of `add`/`start`, or a finishing task): keep it short.
///
/// A task is intercepted once; it is intercepted again only when a reactor requeues it with
/// ``ReactorConfiguration/reinterceptOnRequeue``. Tasks released from a batch are not intercepted
/// again.
///
/// ``adapt(task:)`` is an optional asynchronous step that runs right before *every* execution of
/// the task (including reruns after a requeue), inside the task's concurrency slot and deadline;
/// an error it throws ends the task with that error, delivered to the caller unchanged (reactors
/// do not see it).
public protocol Interceptor: Sendable {
    /// Examines, and may change or replace, `task` before it executes.
    ///
    /// - Parameters:
    ///   - task: the task about to execute; assign to change it.
    ///   - currentBatchCount: how many tasks this interceptor currently holds (``InterceptCommand/hold``).
    /// - Returns: what to do with the task; see ``InterceptCommand`` for how several interceptors'
    ///   commands combine.
    func intercept<T: ManagedTask>(task: inout T, currentBatchCount: Int) -> InterceptCommand

    /// Prepares `task` right before each execution (for example by fetching a fresh credential),
    /// or throws to end it with that error. Default: does nothing.
    func adapt<T: ManagedTask>(task: T) async throws
}

extension Interceptor {
    /// Does nothing.
    public func adapt<T: ManagedTask>(task: T) async throws {}
}
