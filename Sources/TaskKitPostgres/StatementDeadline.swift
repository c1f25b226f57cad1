#if PostgreSQL
import NIOConcurrencyHelpers

/// Runs `operation` in a task of its own and returns its result, or throws
/// ``PostgresSingleFlightError/databaseTimeout(statement:after:)`` when `timeout` passes first,
/// or `CancellationError` when the calling task is cancelled first. In both of those cases the
/// operation's task is cancelled and left to end by itself: the caller never waits for it, so the
/// bound holds even where postgres-nio does not react to cancellation (a request waiting for a
/// connection to an unreachable database).
///
/// What a statement costs on top of the query (Benchmarks/NOTES.md, 2026-11-30): the operation's
/// task starts at once on the caller's thread (`Task.immediate`, where available), not through
/// the global executor's queue, and the timeout is kept by ``StatementTimers``, one task for the
/// whole process, not by a task and a timer per statement.
func withStatementDeadline<Result: Sendable>(
    _ timeout: Duration,
    statement: String,
    timers: StatementTimers = .shared,
    _ operation: @escaping @Sendable () async throws -> Result
) async throws -> Result {
    let race = DeadlineRace<Result>(timeout: timeout, statement: statement)
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            guard race.attach(continuation) else { return }
            let body: @Sendable () async -> Void = {
                do {
                    race.finish(.success(try await operation()))
                } catch is CancellationError {
                    race.finish(.failure(CancellationError()))
                } catch {
                    race.finish(.failure(PostgresSingleFlightError.databaseFailure(
                        statement: statement, underlying: error)))
                }
            }
            race.setWork(startImmediately(body))
            timers.add(race, deadline: .now + timeout, timeout: timeout)
        }
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// Starts `operation` in a task of its own, at once on the calling thread where
/// `Task.immediate` is available (Apple platforms before 26: through the global executor's queue).
func startImmediately(_ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
    if #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) {
        return Task.immediate(operation: operation)
    }
    return Task(operation: operation)
}

/// A statement ``StatementTimers`` may time out.
protocol TimedStatement: AnyObject, Sendable {
    /// Whether it ended (answered, failed, timed out or cancelled).
    var isFinished: Bool { get }
    /// Ends it with ``PostgresSingleFlightError/databaseTimeout(statement:after:)``, if it has
    /// not ended.
    func timeOut()
}

/// The state shared by the operation, the timers and the cancellation handler of one
/// ``withStatementDeadline(_:statement:_:)``: the first to finish resumes the continuation and
/// cancels the operation's task.
private final class DeadlineRace<Result: Sendable>: TimedStatement {
    private struct State {
        var continuation: CheckedContinuation<Result, any Error>?
        var finished = false
        var early: Swift.Result<Result, any Error>?
        var work: Task<Void, Never>?
    }

    private let state = NIOLockedValueBox(State())
    private let timeout: Duration
    private let statement: String

    init(timeout: Duration, statement: String) {
        self.timeout = timeout
        self.statement = statement
    }

    var isFinished: Bool { state.withLockedValue { $0.finished } }

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

    /// Keeps the operation's task, to cancel it when the race ends first; cancels it at once
    /// when the race has ended (the caller was cancelled while it started).
    func setWork(_ work: Task<Void, Never>) {
        let finished = state.withLockedValue { state -> Bool in
            if state.finished { return true }
            state.work = work
            return false
        }
        if finished { work.cancel() }
    }

    func timeOut() {
        finish(.failure(PostgresSingleFlightError.databaseTimeout(statement: statement, after: timeout)))
    }

    func finish(_ result: Swift.Result<Result, any Error>) {
        let (continuation, work) = state.withLockedValue { state in
            guard !state.finished else {
                return (CheckedContinuation<Result, any Error>?.none, Task<Void, Never>?.none)
            }
            state.finished = true
            if state.continuation == nil { state.early = result }
            defer { state.continuation = nil; state.work = nil }
            return (state.continuation, state.work)
        }
        work?.cancel()
        continuation?.resume(with: result)
    }
}

/// The timeouts of every statement in the process. A statement is added to the queue of its
/// timeout; as every entry of a queue has the same timeout, the queue is in deadline order, and a
/// statement that ended is dropped from its front by the next addition (so a queue holds about
/// the statements running, plus those behind a slow one). One task sleeps until the earliest
/// front's deadline and times out what is still running then; it ends when every queue is empty,
/// and the next addition starts another. An addition whose deadline comes before the sleeper's
/// wakes starts a new sleeper and cancels the old one.
final class StatementTimers: Sendable {
    /// The process's timers (a test makes its own).
    static let shared = StatementTimers()

    init() {}

    private struct Entry {
        let deadline: ContinuousClock.Instant
        let statement: any TimedStatement
    }

    /// Entries in deadline order; `head` is the index of the first not removed.
    private struct Queue {
        var entries: [Entry] = []
        var head = 0

        var first: Entry? { head < entries.count ? entries[head] : nil }

        mutating func removeFirst() {
            head += 1
            if head == entries.count {
                entries.removeAll(keepingCapacity: entries.count <= 64)
                head = 0
            } else if head >= 64, head * 2 >= entries.count {
                entries.removeFirst(head)
                head = 0
            }
        }

        /// Drops the ended statements at the front.
        mutating func dropFinished() {
            while let first, first.statement.isFinished { removeFirst() }
        }

        /// Drops the ended statements at the front and appends `entry`.
        mutating func add(_ entry: Entry) {
            dropFinished()
            entries.append(entry)
        }
    }

    private struct State {
        var queues: [Duration: Queue] = [:]
        /// The sleeper's generation: a sleeper that finds another number ends.
        var generation = 0
        /// Until when the current sleeper sleeps; `nil` when there is none.
        var sleepingUntil: ContinuousClock.Instant?
        var sleeper: Task<Void, Never>?
    }

    private let state = NIOLockedValueBox(State())

    /// The number of statements in the queues (ended ones not yet dropped included), for the tests.
    var count: Int {
        state.withLockedValue { $0.queues.values.reduce(0) { $0 + $1.entries.count - $1.head } }
    }

    func add(_ statement: any TimedStatement, deadline: ContinuousClock.Instant, timeout: Duration) {
        let (start, stop) = state.withLockedValue { state -> (Int?, Task<Void, Never>?) in
            state.queues[timeout, default: Queue()].add(Entry(deadline: deadline, statement: statement))
            if let sleepingUntil = state.sleepingUntil, sleepingUntil <= deadline { return (nil, nil) }
            state.generation += 1
            state.sleepingUntil = deadline
            return (state.generation, state.sleeper)
        }
        stop?.cancel()
        guard let start else { return }
        let sleeper = Task.detached { await self.run(generation: start) }
        state.withLockedValue { state in
            if state.generation == start { state.sleeper = sleeper }
        }
    }

    /// Sleeps until the earliest deadline, times out the statements past theirs, and again,
    /// until the queues are empty or another sleeper took over.
    private func run(generation: Int) async {
        while true {
            let wake = state.withLockedValue { state -> ContinuousClock.Instant? in
                guard state.generation == generation else { return nil }
                let now = ContinuousClock.now
                for timeout in Array(state.queues.keys) {
                    state.queues[timeout]?.dropFinished()
                    if state.queues[timeout]?.first == nil { state.queues[timeout] = nil }
                }
                let next = state.queues.values.compactMap { $0.first?.deadline }.min()
                if let next, next > now {
                    state.sleepingUntil = next
                    return next
                }
                if next == nil {
                    state.sleepingUntil = nil
                    state.sleeper = nil
                }
                return next
            }
            guard let wake else { return }
            do {
                try await Task.sleep(until: wake, clock: .continuous)
            } catch {
                return  // cancelled: a newer sleeper took over
            }
            let expired = state.withLockedValue { state -> [any TimedStatement] in
                guard state.generation == generation else { return [] }
                let now = ContinuousClock.now
                var expired: [any TimedStatement] = []
                for timeout in Array(state.queues.keys) {
                    while let first = state.queues[timeout]?.first, first.deadline <= now {
                        expired.append(first.statement)
                        state.queues[timeout]?.removeFirst()
                    }
                }
                return expired
            }
            for statement in expired { statement.timeOut() }
        }
    }
}

#endif
