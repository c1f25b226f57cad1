/// What a ``TaskStore`` needs from a task it tracks, whatever the task's result type: cancel it and
/// wait for it to finish. `Task` conforms; a `Task` is one reference, so the existential stores it
/// inline without allocating.
@usableFromInline
protocol TaskStoreHandle: Sendable {
    /// Cancels the task.
    func cancel()
    /// Returns once the task has finished, ignoring its result.
    func waitForCompletion() async
}

extension Task: TaskStoreHandle {
    @inlinable
    func waitForCompletion() async {
        _ = await result
    }
}
