/// The caller's grip on one task added to a ``TaskManager``: start it, cancel it, read its state.
///
/// A handle is a small value (the task's identifier and a reference to its manager); copies are
/// interchangeable, and two handles for the same task of the same manager compare equal.
public struct TaskHandle: Sendable, Hashable, CustomStringConvertible {
    /// The task's identifier, unique within its manager (1, 2, 3… in the order tasks were added).
    public let identifier: Int
    let storage: TaskManagerStorage

    @usableFromInline
    init(identifier: Int, storage: TaskManagerStorage) {
        self.identifier = identifier
        self.storage = storage
    }

    /// The task's current state. Cancelled, timed-out and discarded tasks read ``TaskState/finished``.
    public var state: TaskState { storage.state(of: identifier) }

    /// Starts a task added with `startImmediately: false` (after its `after:` delay, if any).
    /// Calling it again, or on a task already started or finished, does nothing.
    public func start() { storage.start(identifier) }

    /// Cancels the task: its ``ManagedTask/didCancel(with:)`` receives ``TaskError/cancelled``,
    /// then its completion receives `.failure(TaskError.cancelled)`, exactly once; if it was
    /// executing, the Swift task running it is cancelled and its eventual result is dropped.
    /// Cancelling before ``start()`` wins: the task never runs. Does nothing once the task
    /// finished.
    public func cancel() { storage.cancel(identifier) }

    public static func == (lhs: TaskHandle, rhs: TaskHandle) -> Bool {
        lhs.identifier == rhs.identifier && lhs.storage === rhs.storage
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(identifier)
        hasher.combine(ObjectIdentifier(storage))
    }

    public var description: String { "TaskHandle(\(identifier), \(state))" }
}
