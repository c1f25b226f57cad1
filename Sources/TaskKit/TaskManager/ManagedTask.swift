/// A unit of work run by a ``TaskManager``.
///
/// A task is a reference type: interceptors may change it before it runs, reactors may look at
/// it afterwards, and requeueing runs the same object again. Its work is ``execute()``, an
/// `async throws` function; a task written in the callback style (Tasker's
/// `execute(completion:)`) conforms to ``CallbackManagedTask`` instead, which supplies
/// ``execute()`` from it. A type that provides neither does not compile.
///
/// The manager calls ``execute()``; the task is cancelled cooperatively (the Swift task running
/// it is cancelled) and told through ``didCancel(with:)``.
///
/// ```swift
/// final class Add: ManagedTask {
///     let a: Int, b: Int
///     init(_ a: Int, _ b: Int) { self.a = a; self.b = b }
///     func execute() async throws -> Int { a + b }
/// }
/// ```
public protocol ManagedTask: AnyObject, Sendable {
    /// The type of a successful result.
    associatedtype SuccessValue: Sendable

    /// The task's own deadline, counted from the moment it is started (after any `after:` delay)
    /// until its result is delivered. `nil` (the default) means no deadline. A `timeout:` given
    /// to ``TaskManager/add(task:startImmediately:after:timeout:completeOn:completion:)``
    /// overrides it.
    var timeout: Duration? { get }

    /// Does the work and returns its result, or throws.
    func execute() async throws -> SuccessValue

    /// Called when the manager ends the task with `error` (cancelled, timed out, discarded, or
    /// failed because the reactor that requeued it failed), before the caller's completion.
    /// Use it to stop work that does not watch Swift task cancellation. Default: nothing.
    func didCancel(with error: TaskError)
}

extension ManagedTask {
    /// No deadline.
    public var timeout: Duration? { nil }

    /// Does nothing.
    public func didCancel(with error: TaskError) {}
}

/// A ``ManagedTask`` written in the callback style: its work is ``execute(completion:)``, and
/// ``ManagedTask/execute()`` suspends, without blocking a thread, until the completion is called.
///
/// ```swift
/// final class LegacyFetch: CallbackManagedTask {
///     func execute(completion: @escaping @Sendable (Result<String, any Error>) -> Void) {
///         legacyClient.fetch { completion($0) }
///     }
/// }
/// ```
public protocol CallbackManagedTask: ManagedTask {
    /// Does the work and calls `completion` exactly once with the outcome.
    ///
    /// Later calls of `completion` are ignored.
    func execute(completion: @escaping @Sendable (Result<SuccessValue, any Error>) -> Void)
}

extension CallbackManagedTask {
    /// Calls ``execute(completion:)`` and suspends, without blocking a thread, until it completes.
    public func execute() async throws -> SuccessValue {
        try await awaitCallback { (done: @escaping @Sendable (Result<SuccessValue, any Error>) -> Void) in
            self.execute(completion: done)
        }
    }
}
