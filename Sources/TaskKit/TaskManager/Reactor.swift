/// Runs in reaction to a task's result, before that result reaches the caller.
///
/// After each execution the manager asks every reactor, in order,
/// ``shouldExecute(after:from:with:)``: the reactor sees the result, the task that produced it
/// and the task's handle, so it always knows which task triggered it. For each reactor that
/// answers `true`:
///
/// - if it is not running, the manager runs it (``execute()``), once;
/// - if it is already running, the task joins that run: a reactor is never run twice at once.
///
/// The task then waits for every reaction it triggered. When they are over, the task either runs
/// again (when one of them has ``ReactorConfiguration/requeuesTask``), or delivers the result
/// that triggered them. If a reaction fails or exceeds ``ReactorConfiguration/timeout``,
/// exactly the tasks it was to requeue fail with ``TaskError/reactorFailed(type:error:)`` or
/// ``TaskError/reactorTimedOut(type:)``; tasks that merely joined a non-requeueing reaction
/// deliver their result. In every outcome the reaction's record of triggering tasks is cleared.
///
/// The reaction is ``execute()``. A reactor written in the callback style (Tasker's
/// `execute(done:)`) conforms to ``CallbackReactor``, which supplies ``execute()`` from it; a
/// reactor that only *decides* conforms to ``DecisionOnlyReactor``, whose reaction does nothing
/// and succeeds at once (so with ``ReactorConfiguration/requeuesTask`` it requeues the tasks it
/// matches, with no side work). A type that provides no reaction does not compile.
public protocol Reactor: Sendable {
    /// How the manager behaves while this reactor runs. Read once per reaction.
    var configuration: ReactorConfiguration { get }

    /// Whether `result`, just produced by `task` (whose handle is `handle`), calls for this
    /// reaction. Called outside the manager's lock; keep it fast and side-effect free apart from
    /// the reactor's own bookkeeping.
    func shouldExecute<T: ManagedTask>(
        after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
    ) -> Bool

    /// Performs the reaction; throwing fails it.
    func execute() async throws
}

extension Reactor {
    /// ``ReactorConfiguration/default``.
    public var configuration: ReactorConfiguration { .default }
}

/// A ``Reactor`` written in the callback style: its reaction is ``execute(done:)``, and
/// ``Reactor/execute()`` suspends, without blocking a thread, until `done` is called.
public protocol CallbackReactor: Reactor {
    /// Performs the reaction and calls `done` once: `nil` on success, or the error.
    func execute(done: @escaping @Sendable ((any Error)?) -> Void)
}

extension CallbackReactor {
    /// Calls ``execute(done:)`` and suspends, without blocking a thread, until it reports.
    public func execute() async throws {
        let error = await awaitCallback { (finish: @escaping @Sendable ((any Error)?) -> Void) in
            self.execute(done: finish)
        }
        if let error { throw error }
    }
}

/// A ``Reactor`` that only decides: it implements ``Reactor/shouldExecute(after:from:with:)``,
/// and its reaction does nothing and succeeds at once. With
/// ``ReactorConfiguration/requeuesTask`` it requeues the tasks it matches.
///
/// ```swift
/// // Runs every failed task again, until it succeeds.
/// struct RequeueFailures: DecisionOnlyReactor {
///     var configuration: ReactorConfiguration { ReactorConfiguration(requeuesTask: true) }
///     func shouldExecute<T: ManagedTask>(
///         after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
///     ) -> Bool {
///         if case .failure = result { return true } else { return false }
///     }
/// }
/// ```
public protocol DecisionOnlyReactor: Reactor {}

extension DecisionOnlyReactor {
    /// Does nothing: the reaction succeeds at once.
    public func execute() async throws {}
}
