/// A unit of work run by a ``TaskManager``.
///
/// A task is a reference type: interceptors may change it before it runs, reactors may look at
/// it afterwards, and requeueing runs the same object again. Write its work in one of two ways,
/// whichever suits the code it wraps:
///
/// - ``execute()`` as an `async throws` function, or
/// - ``execute(completion:)`` calling `completion` once with the result.
///
/// Each has a default written in terms of the other, so implement at least one (a task that
/// implements neither stops with a precondition failure naming its type when it first runs).
/// The manager always calls the async form; the task is cancelled cooperatively (the Swift task
/// running it is cancelled) and told through ``didCancel(with:)``.
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

    /// Does the work and calls `completion` exactly once with the outcome.
    ///
    /// Later calls of `completion` are ignored.
    func execute(completion: @escaping @Sendable (Result<SuccessValue, any Error>) -> Void)

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

    /// Runs ``execute()`` in a new Swift task and passes its outcome to `completion`.
    public func execute(completion: @escaping @Sendable (Result<SuccessValue, any Error>) -> Void) {
        precondition(
            BridgeGuard.bridging != ObjectIdentifier(self),
            "ManagedTask \(Self.self) must implement execute(completion:) or execute() async throws"
        )
        Task {
            do {
                completion(.success(try await self.execute()))
            } catch {
                completion(.failure(error))
            }
        }
    }

    /// Calls ``execute(completion:)`` and suspends, without blocking a thread, until it completes.
    public func execute() async throws -> SuccessValue {
        try await BridgeGuard.$bridging.withValue(ObjectIdentifier(self)) {
            try await awaitCallback { (done: @escaping @Sendable (Result<SuccessValue, any Error>) -> Void) in
                self.execute(completion: done)
            }
        }
    }
}

/// Detects a conformer that implements neither form of `execute`, whose two defaults would
/// otherwise call each other forever.
enum BridgeGuard {
    @TaskLocal static var bridging: ObjectIdentifier?
}
