extension MonoTask {
    /// What ``MonoTask/clearResult(ongoingExecutionStrategy:restartWhenIdle:)`` does with a
    /// load that is in progress. The cached value is dropped in every case.
    public enum OngoingExecutionStrategy: Sendable, Hashable, CaseIterable {
        /// Stop the load now: every waiter fails at once with
        /// ``MonoTask/Errors/executionCancelledDueToClearResult``, the `Task` running an async
        /// task block is cancelled, its result is discarded and no pending retry ever runs.
        /// The next load waits until the cancelled attempt has actually returned, so two task
        /// blocks never overlap.
        case cancel
        /// Let the current attempt finish, discard its result (success or failure) and then run
        /// the task again; the fresh result goes to every waiter, those registered before the
        /// clear and those arriving after it. A load waiting for a retry is replaced at once.
        case restart
        /// Let the load finish normally: its result is delivered and, on success, cached.
        case allowCompletion
    }

    /// Errors produced by ``MonoTask`` itself (task blocks' own errors are passed through as is).
    public enum Errors: Error, Sendable, Hashable {
        /// The load this caller was waiting for was stopped by
        /// `clearResult(ongoingExecutionStrategy: .cancel)`.
        case executionCancelledDueToClearResult
    }
}
