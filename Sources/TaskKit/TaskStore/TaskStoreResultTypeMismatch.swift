/// The error of the task that ``TaskStore``'s value-returning `addTask` returns under
/// ``TaskStoreDuplicateKeyBehavior/preferPrevious-type.property`` when the task
/// running under the key has another result type: there is no value of the requested type to
/// return, so nothing starts and the returned task fails at once with this error (the running
/// task goes on untouched).
///
/// A value-returning call whose result is `Void` never gets it: it waits for whatever runs under
/// the key, as the `Void` form does. So adding `try` to a `Void` operation (which selects the
/// value-returning form) keeps working. Keep one result type per key when you use
/// `.preferPrevious`.
public struct TaskStoreResultTypeMismatch: Error, Sendable, Hashable, CustomStringConvertible {
    /// The key, as `String(describing:)` renders it.
    public let key: String
    /// The type of the running task that was kept, such as `Task<String, any Error>`.
    public let runningTaskType: String
    /// The type of task the call returns, such as `Task<Int, any Error>`.
    public let requestedTaskType: String

    /// The error for `key`, naming both task types.
    init(key: String, runningTaskType: String, requestedTaskType: String) {
        self.key = key
        self.runningTaskType = runningTaskType
        self.requestedTaskType = requestedTaskType
    }

    public var description: String {
        "TaskStore.addTask: duplicateKeyBehavior is .preferPrevious and key \(key) is running a "
            + "\(runningTaskType), which cannot be returned as \(requestedTaskType); "
            + "use one result type per key with .preferPrevious"
    }
}
