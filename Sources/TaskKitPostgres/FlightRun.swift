#if PostgreSQL
import NIOConcurrencyHelpers
import Synchronization

/// One process's flight for a key, run in a task of its own, whose outcome reaches its callers
/// exactly once: the task's result, an answer given early (a stored value, from the thread the
/// database's reply arrived on), or the timeout of one of its statements, whichever comes first.
///
/// Its statements (``statement(_:timeout:timers:_:)``) run in the flight's task itself, not in a
/// task each: a timeout answers the callers at once and cancels the task, which the statement,
/// left to end by itself, then leaves with `CancellationError`. So the deadline holds where
/// postgres-nio does not react to cancellation (a query to a server that accepts and never
/// answers), and a stored hit reaches its callers with no task between the reply and them
/// (Benchmarks/NOTES.md, 2026-11-30).
final class FlightRun<Output: Sendable>: FlightEnding {
    private struct State {
        /// `nil` once the run has ended: what it holds (the cache, its callers) goes with it,
        /// though a statement's timer may keep the run a while longer.
        var completion: (@Sendable (Result<Output, any Error>) -> Void)?
        var task: Task<Void, Never>?
    }

    private let state: NIOLockedValueBox<State>

    private init(completion: @escaping @Sendable (Result<Output, any Error>) -> Void) {
        self.state = NIOLockedValueBox(State(completion: completion))
    }

    /// Runs `body` in a task of its own, started at once on the calling thread where
    /// `Task.immediate` is available, and calls `completion` exactly once, never under a lock:
    /// with `body`'s result, with an answer given through ``answer(_:)``, or with
    /// ``PostgresSingleFlightError/databaseTimeout(statement:after:)`` when one of its statements
    /// times out first.
    static func launch(
        completion: @escaping @Sendable (Result<Output, any Error>) -> Void,
        _ body: @escaping @Sendable (FlightRun) async throws -> Output
    ) {
        let run = FlightRun(completion: completion)
        let operation: @Sendable () async -> Void = {
            let result: Result<Output, any Error>
            do {
                result = .success(try await body(run))
            } catch {
                result = .failure(error)
            }
            run.end(with: result, cancellingTask: false)
        }
        run.setTask(startImmediately(operation))
    }

    /// Whether the run has ended (its callers were answered).
    var hasEnded: Bool { state.withLockedValue { $0.completion == nil } }

    /// Answers the callers with `output` now, if the run has not ended; its task then stops at
    /// its next statement. Returns whether this call ended the run.
    @discardableResult
    func answer(_ output: Output) -> Bool {
        end(with: .success(output), cancellingTask: false)
    }

    /// Ends the run with `result`, if it has not ended, and cancels its task if
    /// `cancellingTask`; returns whether this call ended it.
    @discardableResult
    private func end(with result: Result<Output, any Error>, cancellingTask: Bool) -> Bool {
        let (completion, task) = state.withLockedValue { state in
            defer { state.completion = nil; state.task = nil }
            return (state.completion, state.task)
        }
        guard let completion else { return false }
        if cancellingTask { task?.cancel() }
        completion(result)
        return true
    }

    /// Keeps the run's task, to cancel it on a timeout; cancels it at once when the run ended
    /// while it started (harmless when it ended by an answer: the task stops at its next
    /// statement either way).
    private func setTask(_ task: Task<Void, Never>) {
        let ended = state.withLockedValue { state -> Bool in
            if state.completion == nil { return true }
            state.task = task
            return false
        }
        if ended { task.cancel() }
    }

    func timeOut(_ error: PostgresSingleFlightError) {
        end(with: .failure(error), cancellingTask: true)
    }
}

/// What a statement of a flight needs of its run, whatever the run's output.
protocol FlightEnding: AnyObject, Sendable {
    /// Whether the run has ended.
    var hasEnded: Bool { get }
    /// Ends the run with a statement's timeout, if it has not ended, and cancels its task.
    func timeOut(_ error: PostgresSingleFlightError)
}

extension FlightEnding {
    /// Runs the statement `body`, named `name` in errors, in the run's task, bounded by
    /// `timeout`: when the timeout passes first, the run ends with
    /// ``PostgresSingleFlightError/databaseTimeout(statement:after:)``. When the run has ended
    /// by the time the statement does (timed out, or answered early), this throws
    /// `CancellationError`: the flight goes no further (it must not claim or load for no one).
    /// Any other error is wrapped in ``PostgresSingleFlightError/databaseFailure(statement:underlying:)``.
    func statement<Answer>(
        _ name: String,
        timeout: Duration,
        timers: StatementTimers = .shared,
        _ body: () async throws -> Answer
    ) async throws -> Answer {
        let running = RunningStatement(run: self, name: name, timeout: timeout)
        timers.add(running, deadline: .now + timeout, timeout: timeout)
        defer { running.finish() }
        let result: Answer
        do {
            result = try await body()
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            if hasEnded { throw CancellationError() }
            throw PostgresSingleFlightError.databaseFailure(statement: name, underlying: error)
        }
        if hasEnded { throw CancellationError() }
        return result
    }
}

/// A statement of a flight, as ``StatementTimers`` sees it.
private final class RunningStatement: TimedStatement {
    private let run: any FlightEnding
    private let name: String
    private let timeout: Duration
    private let done = Atomic(false)

    init(run: any FlightEnding, name: String, timeout: Duration) {
        self.run = run
        self.name = name
        self.timeout = timeout
    }

    var isFinished: Bool { done.load(ordering: .acquiring) || run.hasEnded }

    func finish() { done.store(true, ordering: .releasing) }

    func timeOut() {
        guard !done.load(ordering: .acquiring) else { return }
        run.timeOut(PostgresSingleFlightError.databaseTimeout(statement: name, after: timeout))
    }
}
#endif
