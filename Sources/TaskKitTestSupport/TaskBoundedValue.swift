import TaskKit
import Testing

/// Thrown by `Task.boundedValue(within:sourceLocation:)` when the task has not finished in
/// time.
public struct TaskDeadlineExceeded: Error, CustomStringConvertible {
    /// The limit that passed.
    public let limit: Duration

    public var description: String { "the task did not finish within \(limit)" }
}

extension Task {
    /// The task's value (or its error), awaited for at most `limit` of real time.
    ///
    /// The wait of a test for a task it made: if the task never finishes (a lost continuation in
    /// the code under test, say), this records an issue and throws ``TaskDeadlineExceeded``, so
    /// the test fails instead of hanging CI. Awaiting `value` itself ignores the awaiting task's
    /// cancellation, so Swift Testing's `.timeLimit` alone could not end such a wait. The task is
    /// left running. The default limit is ``TestDeadline/standard``; it only matters when a test
    /// is broken.
    ///
    /// - Parameters:
    ///   - limit: How long to wait, in real time.
    ///   - sourceLocation: Where the issue is recorded.
    /// - Returns: The task's value.
    /// - Throws: The task's error, or ``TaskDeadlineExceeded``.
    public func boundedValue(
        within limit: Duration = TestDeadline.standard, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Success {
        // Whoever takes the continuation first resumes it: the task's end or the deadline.
        let slot = LockedState<CheckedContinuation<Result<Success, any Error>, Never>?>(nil)
        let task = self
        let result = await withCheckedContinuation { continuation in
            slot.withLock { $0 = continuation }
            let deadline = Task<Void, Never> {
                try? await Task<Never, Never>.sleep(for: limit)
                guard !Task<Never, Never>.isCancelled else { return }  // the task ended first
                slot.withLock { $0.take() }?.resume(returning: .failure(TaskDeadlineExceeded(limit: limit)))
            }
            Task<Void, Never> {
                let result: Result<Success, any Error>
                do {
                    result = .success(try await task.value)
                } catch {
                    result = .failure(error)
                }
                deadline.cancel()
                slot.withLock { $0.take() }?.resume(returning: result)
            }
        }
        if case .failure(let error as TaskDeadlineExceeded) = result {
            Issue.record("\(error)", sourceLocation: sourceLocation)
        }
        return try result.get()
    }
}
