/// A task a ``TaskStore`` tracks, whatever its result type: the store cancels it and waits for it.
///
/// One reference in either case, so the store's table entries are plain loadable values: the
/// compiler copies and destroys them with a retain or a release. (An `any Protocol` existential
/// over `Task` made every entry address-only, and every copy and destroy of one went through
/// value-witness calls on run-time metadata: ~300 instructions per `addTask` round trip.)
@usableFromInline
enum TaskStoreHandle: Sendable {
    /// A task started by the `Void` overload of `addTask`: stored as it is.
    case plain(Task<Void, Never>)
    /// A task started by the value-returning overload, in a box that remembers its `Success`
    /// type (one allocation, on that overload only).
    case typed(any TypedTaskStoreHandle)

    /// Cancels the task.
    @inlinable
    func cancel() {
        switch self {
        case .plain(let task): task.cancel()
        case .typed(let box): box.cancel()
        }
    }

    /// Returns once the task has finished, ignoring its result.
    @inlinable
    func waitForCompletion() async {
        switch self {
        case .plain(let task): await task.value
        case .typed(let box): await box.waitForCompletion()
        }
    }

    /// The type of the stored task, for ``TaskStoreResultTypeMismatch``.
    @usableFromInline
    var taskType: Any.Type {
        switch self {
        case .plain(let task): type(of: task)
        case .typed(let box): box.taskType
        }
    }
}

/// The box of a task started by the value-returning `addTask`, seen without its `Success` type.
@usableFromInline
protocol TypedTaskStoreHandle: AnyObject, Sendable {
    /// Cancels the task.
    func cancel()
    /// Returns once the task has finished, ignoring its result.
    func waitForCompletion() async
    /// The type of the boxed task.
    var taskType: Any.Type { get }
}

/// Holds a `Task<Success, any Error>` for the store's table.
@usableFromInline
final class TypedTaskBox<Success: Sendable>: TypedTaskStoreHandle {
    @usableFromInline let task: Task<Success, any Error>

    @inlinable
    init(_ task: Task<Success, any Error>) {
        self.task = task
    }

    @usableFromInline
    func cancel() {
        task.cancel()
    }

    @usableFromInline
    func waitForCompletion() async {
        _ = await task.result
    }

    @usableFromInline
    var taskType: Any.Type { type(of: task) }
}
