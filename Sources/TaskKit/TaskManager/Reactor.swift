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
/// Write the reaction as ``execute()`` (async) or ``execute(done:)`` (callback); each has a
/// default written in terms of the other. A reactor that implements neither only *decides*: its
/// reaction does nothing and succeeds at once, so a reactor whose configuration has
/// ``ReactorConfiguration/requeuesTask`` and that implements only
/// ``shouldExecute(after:from:with:)`` requeues the tasks it matches, with no side work.
public protocol Reactor: Sendable {
    /// How the manager behaves while this reactor runs. Read once per reaction.
    var configuration: ReactorConfiguration { get }

    /// Whether `result`, just produced by `task` (whose handle is `handle`), calls for this
    /// reaction. Called outside the manager's lock; keep it fast and side-effect free apart from
    /// the reactor's own bookkeeping.
    func shouldExecute<T: ManagedTask>(
        after result: Result<T.SuccessValue, any Error>, from task: T, with handle: TaskHandle
    ) -> Bool

    /// Performs the reaction and calls `done` once: `nil` on success, or the error.
    func execute(done: @escaping @Sendable ((any Error)?) -> Void)

    /// Performs the reaction; throwing fails it.
    func execute() async throws
}

extension Reactor {
    /// ``ReactorConfiguration/default``.
    public var configuration: ReactorConfiguration { .default }

    /// Runs ``execute()`` in a new Swift task and reports its outcome to `done`; for a reactor
    /// that implements neither form, reports success at once (the reaction does nothing).
    public func execute(done: @escaping @Sendable ((any Error)?) -> Void) {
        if ReactorBridgeGuard.bridging == ObjectIdentifier(Self.self) {
            // Called by the default `execute()`: neither form is implemented.
            done(nil)
            return
        }
        Task {
            do {
                try await self.execute()
                done(nil)
            } catch {
                done(error)
            }
        }
    }

    /// Calls ``execute(done:)`` and suspends, without blocking a thread, until it reports.
    public func execute() async throws {
        let error: (any Error)? = await ReactorBridgeGuard.$bridging.withValue(ObjectIdentifier(Self.self)) {
            await awaitCallback { (finish: @escaping @Sendable ((any Error)?) -> Void) in
                self.execute(done: finish)
            }
        }
        if let error { throw error }
    }
}

/// Detects a reactor implementing neither form of `execute` (its reaction is then empty).
enum ReactorBridgeGuard {
    @TaskLocal static var bridging: ObjectIdentifier?
}
