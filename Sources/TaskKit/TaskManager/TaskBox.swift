import Dispatch
import Synchronization

/// A type-erased managed task with its caller's completion, as the manager's state machine
/// carries it.
///
/// `@unchecked Sendable` is sound because the mutable fields (`task` in the subclass, `result`)
/// are owned by exactly one party at a time, and ownership moves only through the manager's
/// lock: the state machine hands the payload to the interceptor runner (phase `intercepting`),
/// then to one execution job (phase `executing`, which writes `result` before reporting),
/// then to the reactor evaluation or the delivery, each hand-over being a lock release followed
/// by a lock acquisition. A termination that arrives during interception is deferred by the
/// state machine until the interceptors are done, so `didCancel` never reads `task` while an
/// interceptor writes it. A stale execution (cancelled or timed out) may still write `result`
/// after its task ended, but nobody reads the result of an ended task. `executionJob` follows
/// its own protocol, described at ``publishExecution(_:)``. Everything else is `let` or atomic.
class AnyTaskBox: @unchecked Sendable {
    /// `none` → `published` (a job is stored in `executionJob`) → `none` (retired before the
    /// next attempt's job is stored) …; `cancelled` is final.
    private static var none: UInt8 { 0 }
    private static var published: UInt8 { 1 }
    private static var cancelled: UInt8 { 2 }

    private let executionState = Atomic<UInt8>(0)
    /// The Swift task running the current execution; see ``publishExecution(_:)``.
    private var executionJob: Task<Void, Never>?

    /// Makes `job`, the Swift task just spawned for the next execution of this task, reachable
    /// by ``cancelExecution()`` (without the manager's lock), or cancels it at once if the
    /// execution was already cancelled.
    ///
    /// Called by the thread that performed the `execute` action, once per execution; executions
    /// of one task never overlap (the next is spawned only after the previous one reported), so
    /// at most one thread writes `executionJob` at a time. `cancelExecution()` reads it only
    /// after reading `published` with acquiring ordering, which is set with releasing ordering
    /// after the write. Before overwriting, the writer moves `published` back to `none` with a
    /// compare-and-exchange: if a canceller got there first (`cancelled`), the writer does not
    /// write and cancels its own job; if the writer got there first, the canceller reads `none`
    /// and leaves the cancelling to the writer, which then fails its final compare-and-exchange
    /// to `published` and cancels its own job. So the variable is never read and written at
    /// the same time, and the job of a cancelled execution is always cancelled.
    final func publishExecution(_ job: Task<Void, Never>) {
        if executionState.load(ordering: .acquiring) == Self.published {
            guard executionState.compareExchange(
                expected: Self.published, desired: Self.none, ordering: .acquiringAndReleasing
            ).exchanged else {
                job.cancel()
                return
            }
        }
        if executionState.load(ordering: .acquiring) == Self.cancelled {
            job.cancel()
            return
        }
        executionJob = job
        guard executionState.compareExchange(
            expected: Self.none, desired: Self.published, ordering: .acquiringAndReleasing
        ).exchanged else {
            job.cancel()
            return
        }
    }

    /// Cancels the Swift task running the current execution (now, or as soon as it is
    /// published). Called at most once, when the manager ends the task while it executes.
    final func cancelExecution() {
        let previous = executionState.exchange(Self.cancelled, ordering: .acquiringAndReleasing)
        if previous == Self.published { executionJob?.cancel() }
    }

    /// The deadline the caller asked for, else the task's own.
    var effectiveTimeout: Duration? { fatalError("abstract") }

    /// Whether the stored result is a success (read when it is delivered).
    var succeeded: Bool { fatalError("abstract") }

    /// Runs the interceptors in order on the task; returns their combined verdict.
    func intercept(_ interceptors: [any Interceptor], batchCounts: [Int]) -> InterceptVerdict {
        fatalError("abstract")
    }

    /// Adapts and executes the task, storing the result; returns whether reactors may see it.
    func run(adapters interceptors: [any Interceptor]) async -> Bool { fatalError("abstract") }

    /// Asks `reactor` whether the stored result calls for it.
    func shouldReact(_ reactor: any Reactor, handle: TaskHandle) -> Bool { fatalError("abstract") }

    /// Delivers the stored result, then calls `returned` (after the completion returned, on the
    /// completion queue if there is one).
    func deliverResult(then returned: @escaping @Sendable () -> Void) { fatalError("abstract") }

    /// Calls `didCancel(with:)`, then completes the caller with `error`, then calls `returned`.
    func terminate(with error: TaskError, then returned: @escaping @Sendable () -> Void) {
        fatalError("abstract")
    }
}

final class TaskBox<T: ManagedTask>: AnyTaskBox, @unchecked Sendable {
    // See AnyTaskBox for why the mutable state is safe.
    typealias Completion = @Sendable (Result<T.SuccessValue, any Error>) -> Void

    private var task: T
    private var result: Result<T.SuccessValue, any Error>?
    private let timeoutOverride: Duration?
    private let completion: Completion?
    private let queue: DispatchQueue?

    init(task: T, timeout: Duration?, queue: DispatchQueue?, completion: Completion?) {
        self.task = task
        self.timeoutOverride = timeout
        self.queue = queue
        self.completion = completion
    }

    override var effectiveTimeout: Duration? { timeoutOverride ?? task.timeout }

    override func intercept(_ interceptors: [any Interceptor], batchCounts: [Int]) -> InterceptVerdict {
        var verdict = InterceptVerdict()
        for index in interceptors.indices {
            let count = batchCounts[index]
            let command = interceptors[index].intercept(task: &task, currentBatchCount: count)
            verdict.record(command, from: index, batchCount: count)
        }
        return verdict
    }

    override var succeeded: Bool {
        if case .success? = result { return true }
        return false
    }

    override func run(adapters interceptors: [any Interceptor]) async -> Bool {
        let task = self.task
        do {
            for interceptor in interceptors {
                try await interceptor.adapt(task: task)
            }
        } catch {
            result = .failure(error)
            return false
        }
        do {
            result = .success(try await task.execute())
        } catch {
            result = .failure(error)
        }
        return true
    }

    override func shouldReact(_ reactor: any Reactor, handle: TaskHandle) -> Bool {
        guard let result else { return false }
        return reactor.shouldExecute(after: result, from: task, with: handle)
    }

    override func deliverResult(then returned: @escaping @Sendable () -> Void) {
        // A stale execution never reaches here: the machine delivers only a reported result.
        guard let completion, let result else { return returned() }
        complete(completion, with: result, then: returned)
    }

    override func terminate(with error: TaskError, then returned: @escaping @Sendable () -> Void) {
        task.didCancel(with: error)
        guard let completion else { return returned() }
        complete(completion, with: .failure(error), then: returned)
    }

    private func complete(
        _ completion: @escaping Completion, with result: Result<T.SuccessValue, any Error>,
        then returned: @escaping @Sendable () -> Void
    ) {
        if let queue {
            queue.async {
                completion(result)
                returned()
            }
        } else {
            completion(result)
            returned()
        }
    }
}
