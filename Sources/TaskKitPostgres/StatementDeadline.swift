#if PostgreSQL
import NIOConcurrencyHelpers

/// Runs `operation` in a task of its own and returns its result, or throws
/// ``PostgresSingleFlightError/databaseTimeout(statement:after:)`` when `timeout` passes first,
/// or `CancellationError` when the calling task is cancelled first. In both of those cases the
/// operation's task is cancelled and left to end by itself: the caller never waits for it, so the
/// bound holds even where postgres-nio does not react to cancellation (a request waiting for a
/// connection to an unreachable database).
func withStatementDeadline<Result: Sendable>(
    _ timeout: Duration,
    statement: String,
    _ operation: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    let race = DeadlineRace<Result>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            guard race.attach(continuation) else { return }
            let work = Task {
                do {
                    race.finish(.success(try await operation()))
                } catch is CancellationError {
                    race.finish(.failure(CancellationError()))
                } catch {
                    race.finish(.failure(PostgresSingleFlightError.databaseFailure(
                        statement: statement, underlying: error)))
                }
            }
            let timer = Task {
                try? await Task.sleep(for: timeout)
                race.finish(.failure(PostgresSingleFlightError.databaseTimeout(
                    statement: statement, after: timeout)))
            }
            race.setTasks(work: work, timer: timer)
        }
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// The state shared by the operation, the timer and the cancellation handler of one
/// ``withStatementDeadline(_:statement:_:)``: the first to finish resumes the continuation and
/// cancels the other tasks.
private final class DeadlineRace<Result: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Result, any Error>?
        var finished = false
        var early: Swift.Result<Result, any Error>?
        var work: Task<Void, Never>?
        var timer: Task<Void, Never>?
    }

    private let state = NIOLockedValueBox(State())

    /// Stores the continuation; resumes it at once and returns `false` when the race already
    /// ended (the caller was cancelled before it began).
    func attach(_ continuation: CheckedContinuation<Result, any Error>) -> Bool {
        let early = state.withLockedValue { state -> Swift.Result<Result, any Error>? in
            if let early = state.early { return early }
            state.continuation = continuation
            return nil
        }
        guard let early else { return true }
        continuation.resume(with: early)
        return false
    }

    func setTasks(work: Task<Void, Never>, timer: Task<Void, Never>) {
        let finished = state.withLockedValue { state -> Bool in
            if state.finished { return true }
            state.work = work
            state.timer = timer
            return false
        }
        if finished {
            work.cancel()
            timer.cancel()
        }
    }

    func finish(_ result: Swift.Result<Result, any Error>) {
        let (continuation, work, timer) = state.withLockedValue { state in
            guard !state.finished else {
                return (CheckedContinuation<Result, any Error>?.none, Task<Void, Never>?.none, Task<Void, Never>?.none)
            }
            state.finished = true
            if state.continuation == nil { state.early = result }
            defer { state.continuation = nil; state.work = nil; state.timer = nil }
            return (state.continuation, state.work, state.timer)
        }
        work?.cancel()
        timer?.cancel()
        continuation?.resume(with: result)
    }
}

#endif
