/// A ``ManagedTask`` made from a closure, for one-off work that needs no class of its own.
///
/// ```swift
/// let manager = TaskManager()
/// let profile = try await manager.value(of: AnyTask { try await api.profile() })
///
/// // Wrapping a callback API:
/// let decoded = AnyTask<Data> { completion in
///     decoder.decode(bytes) { completion($0) }
/// }
/// manager.add(task: decoded) { result in print(result) }
/// ```
///
/// The closure runs each time the manager executes the task (once, or again after a reactor
/// requeues it). ``TaskManager/add(startImmediately:after:timeout:completeOn:execute:completion:)``
/// and ``TaskManager/value(after:timeout:_:)`` create one for you.
public final class AnyTask<SuccessValue: Sendable>: ManagedTask {
    private enum Work: Sendable {
        case async(@Sendable () async throws -> SuccessValue)
        case callback(@Sendable (@escaping @Sendable (Result<SuccessValue, any Error>) -> Void) -> Void)
    }

    private let work: Work
    private let cancelHandler: (@Sendable (TaskError) -> Void)?

    /// The deadline given at creation; see ``ManagedTask/timeout``.
    public let timeout: Duration?

    /// A task that runs an `async` closure.
    ///
    /// - Parameters:
    ///   - timeout: The task's own deadline, counted from its start (see ``ManagedTask/timeout``);
    ///     `nil` for none. When given, it must be greater than zero.
    ///   - execute: The work; its result or error is the task's.
    /// - Precondition: `timeout`, when given, is greater than zero.
    public init(timeout: Duration? = nil, execute: @escaping @Sendable () async throws -> SuccessValue) {
        Self.checkTimeout(timeout)
        self.timeout = timeout
        self.work = .async(execute)
        self.cancelHandler = nil
    }

    /// A task that runs a closure reporting through a completion callback.
    ///
    /// Only the first call of the callback counts. If `execute` never calls it, the task ends only
    /// by cancellation or its deadline.
    ///
    /// - Parameters:
    ///   - timeout: The task's own deadline (see ``ManagedTask/timeout``); `nil` for none.
    ///   - execute: Starts the work and calls the callback it is given once, with the outcome.
    /// - Precondition: `timeout`, when given, is greater than zero.
    public init(
        timeout: Duration? = nil,
        execute: @escaping @Sendable (@escaping @Sendable (Result<SuccessValue, any Error>) -> Void) -> Void
    ) {
        Self.checkTimeout(timeout)
        self.timeout = timeout
        self.work = .callback(execute)
        self.cancelHandler = nil
    }

    /// A task that runs `task`: its work, its ``ManagedTask/timeout`` and its
    /// ``ManagedTask/didCancel(with:)``, under a type that names only the result.
    ///
    /// - Parameter task: The task to run. The same object is used every time this one executes.
    public init<Wrapped: ManagedTask>(fromTask task: Wrapped) where Wrapped.SuccessValue == SuccessValue {
        self.timeout = task.timeout
        self.work = .async { try await task.execute() }
        self.cancelHandler = { task.didCancel(with: $0) }
    }

    /// Runs the closure given at creation.
    public func execute() async throws -> SuccessValue {
        switch work {
        case .async(let body):
            return try await body()
        case .callback(let body):
            return try await awaitCallback { (done: @escaping @Sendable (Result<SuccessValue, any Error>) -> Void) in
                body(done)
            }
        }
    }

    /// Forwards to the wrapped task for ``init(fromTask:)``; does nothing otherwise.
    public func didCancel(with error: TaskError) {
        cancelHandler?(error)
    }

    private static func checkTimeout(_ timeout: Duration?) {
        if let timeout {
            precondition(timeout > .zero, "AnyTask: timeout must be > 0, got \(timeout)")
        }
    }
}
