@available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
extension TaskStore {
    /// Starts `operation` under `key` at once, on the calling thread, without waiting for the
    /// actor to take the task up (`Task.immediate`), applying `duplicateKeyBehavior` as
    /// `addTask(forKey:duplicateKeyBehavior:priority:isolation:operation:)` does.
    ///
    /// The operation runs synchronously inside this call until its first suspension, then
    /// continues as an ordinary task on the caller's actor. So the state it sets before suspending
    /// (a "loading" flag, say) is visible as soon as this returns, and a cancel issued after this
    /// call reaches the operation only at its next check. The duplicate-key behaviours:
    /// - `.cancelPrevious(wait: false)` (the default): the previous tasks are cancelled right
    ///   after the new operation's synchronous start.
    /// - `.cancelPrevious(wait: true)` and `.wait`: the new task starts at once, and its first
    ///   step is to wait for the previous tasks (suspending), so the operation itself starts
    ///   when they have finished, as with `addTask`.
    /// - `.runConcurrently`: the new operation starts at once beside the running ones.
    /// - `.preferPrevious`: with a task running under `key`, nothing starts and the running task
    ///   is returned (as a waiting wrapper if it returns a value).
    ///
    /// The task's end is applied at the store's next call (like a task started from a
    /// nonisolated context; observers are told when it ends), and an operation that finishes
    /// without ever suspending leaves the key idle when this returns.
    ///
    /// - Parameters:
    ///   - key: The key the work runs under.
    ///   - duplicateKeyBehavior: What to do if a task is already running under `key`.
    ///   - priority: The priority of the new task.
    ///   - isolation: The actor the store belongs to (leave the default); `nil` works as for
    ///     `addTask`.
    ///   - operation: The work.
    /// - Returns: The task running `operation`, or the kept task for `.preferPrevious`.
    @discardableResult
    public func addImmediateTask(
        forKey key: Key,
        duplicateKeyBehavior: TaskStoreDuplicateKeyBehavior = .cancelPrevious(wait: false),
        priority: TaskPriority? = nil,
        isolation: isolated (any Actor)? = #isolation,
        operation: nonisolated(nonsending) @escaping @Sendable () async -> Void
    ) -> Task<Void, Never> {
        checkOwner(isolation, in: "addImmediateTask(forKey:duplicateKeyBehavior:priority:isolation:operation:)")
        usesInbox = true
        return add(
            forKey: key, duplicateKeyBehavior: duplicateKeyBehavior, immediate: true,
            keep: { Self.voidTask(waitingFor: $0, priority: priority) }
        ) { id, awaited in
            let task = Task.immediate(priority: priority) {
                _ = isolation
                if let awaited { await Self.waitFor(awaited) }
                await operation()
                self.reportFinishedElsewhere(key: key, id: id)
            }
            return (task, .plain(task))
        }
    }
}
