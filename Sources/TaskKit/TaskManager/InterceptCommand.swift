/// What an ``Interceptor`` wants done with the task it just saw.
///
/// When a manager has several interceptors, each one sees the task in turn (in the order they
/// were given to the manager, each seeing the previous one's changes) and the commands combine:
/// ``forceExecute`` from any interceptor executes the task no matter what the others said;
/// otherwise ``discard`` beats ``hold``, which beats ``execute``. Each interceptor that answers
/// ``execute`` or ``forceExecute`` releases its own batch, whatever the combined verdict on the
/// task itself. A task that is held waits in the batch of the first interceptor that said
/// ``hold``.
public enum InterceptCommand: Sendable, Hashable {
    /// Execute the task, and release every task this interceptor holds in its batch (they
    /// execute first, in the order they were added to the manager).
    case execute
    /// Park the task in this interceptor's batch until it returns ``execute`` (or
    /// ``forceExecute``) for a later task. A held task stays ``TaskState/pending``; it can still
    /// be cancelled or time out.
    case hold
    /// Drop the task: its ``ManagedTask/didCancel(with:)`` receives ``TaskError/discarded`` and
    /// its caller completes with ``TaskError/discarded``.
    case discard
    /// Execute the task even if another interceptor says ``hold`` or ``discard``. Like
    /// ``execute``, it also releases every task *this* interceptor holds (they execute first, in
    /// the order they were added); batches of the other interceptors stay as they are.
    case forceExecute
}
