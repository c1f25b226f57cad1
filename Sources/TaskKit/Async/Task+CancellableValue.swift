extension Task where Failure == Never {
    /// The task's result, awaited in a way that forwards the *awaiting* task's cancellation to
    /// this task.
    ///
    /// `value` alone only waits: cancelling the task that awaits it leaves this task running.
    /// `cancellableValue` cancels this task as soon as the awaiting task is cancelled (immediately
    /// if it already is), then keeps waiting until this task has finished, so the awaiting task
    /// never outlives the work it started. This is the shape SwiftUI's `.task { }` modifier needs:
    ///
    /// ```swift
    /// .task { await model.viewTask().cancellableValue }
    /// ```
    public var cancellableValue: Success {
        get async {
            await withTaskCancellationHandler {
                await self.value
            } onCancel: {
                self.cancel()
            }
        }
    }
}

extension Task where Failure == any Error {
    /// The task's result, awaited in a way that forwards the *awaiting* task's cancellation to
    /// this task.
    ///
    /// Cancelling the awaiting task cancels this task and then waits for it to finish; whatever
    /// this task returns or throws then (typically `CancellationError`) is what this property
    /// returns or throws. See the `Never` variant for the rationale.
    public var cancellableValue: Success {
        get async throws {
            try await withTaskCancellationHandler {
                try await self.value
            } onCancel: {
                self.cancel()
            }
        }
    }
}
