import Dispatch
import Synchronization

/// A type-erased managed task with its caller's completion, as the manager's state machine
/// carries it.
///
/// `@unchecked Sendable` is sound because the mutable fields (`task` and `outcome` in the subclass)
/// are owned by exactly one party at a time, and ownership moves only through the manager's
/// lock: the state machine hands the payload to the interceptor runner (phase `intercepting`),
/// then to one execution job (phase `executing`, which writes `outcome` before reporting),
/// then to the reactor evaluation or the delivery, each hand-over being a lock release followed
/// by a lock acquisition. A termination that arrives during interception is deferred by the
/// state machine until the interceptors are done, so `didCancel` never reads `task` while an
/// interceptor writes it. A stale execution (cancelled or timed out) may still write `outcome`
/// after its task ended, but nobody reads the outcome of an ended task. A job of the direct
/// lane (``TaskManager/value(of:after:timeout:)``, ``TaskManager/add(task:startImmediately:after:timeout:completeOn:completion:)``)
/// writes neither: it reads `task` once the interception ended (the machine registered it
/// executing under the lock before the job was spawned) and hands its result to the caller's
/// completion, or through the awaited hand-over (`awaiter` and `answer` in the subclass, with
/// their own protocol, described at ``TaskBox/awaitValue()``), once the machine granted the
/// delivery.
/// `executionJob` follows its own protocol, described at ``publishExecution(_:)``. `context` is
/// written once, before the box is shared. `nextRetired` is written under the manager's lock
/// while the box is in the manager's list of retired boxes, and after that only by the one
/// thread that took the list out (``TaskManagerStorage/deliveryReturned(retiring:)``).
/// Everything else is `let` or atomic.
///
/// Because each of these protocols orders every access to its field, no two accesses overlap,
/// and the mutable fields are `@exclusivity(unchecked)`: Swift's dynamic exclusivity check of a
/// class's stored property costs about 20 instructions per access, and a task's boxes are
/// accessed about nine times on the general lane (callgrind, `Benchmarks/NOTES.md`).
@usableFromInline
class AnyTaskBox: @unchecked Sendable {
    /// `none` → `published` (a job is stored in `executionJob`) → `none` (retired before the
    /// next attempt's job is stored) …; `cancelled` is final.
    private static var none: UInt8 { 0 }
    private static var published: UInt8 { 1 }
    private static var cancelled: UInt8 { 2 }

    private let executionState = Atomic<UInt8>(0)
    /// The next box in the manager's list of retired boxes (see
    /// ``TaskManagerStorage/deliveryReturned(retiring:)``).
    @exclusivity(unchecked) final var nextRetired: AnyTaskBox?
    /// The Swift task running the current execution; see ``publishExecution(_:)``.
    @exclusivity(unchecked) private var executionJob: Task<Void, any Error>?

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
    ///
    /// Jobs are `Task<Void, any Error>` made from throwing closures that throw nothing: a
    /// `Task<Void, Never>` wraps its non-throwing operation in a reabstraction thunk, whose
    /// context is one more allocation (and free, on another thread) per execution.
    @usableFromInline
    final func publishExecution(_ job: Task<Void, any Error>) {
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

    /// The deadline the caller asked for, else the task's own (read when the box is made).
    @usableFromInline let effectiveTimeout: Duration?

    @usableFromInline
    init(effectiveTimeout: Duration?) {
        self.effectiveTimeout = effectiveTimeout
    }

    /// Whether the stored result is a success (read when it is delivered).
    var succeeded: Bool { fatalError("abstract") }

    /// Runs the interceptors in order on the task; returns their combined verdict.
    func intercept(_ interceptors: [any Interceptor], batchCounts: [Int]) -> InterceptVerdict {
        fatalError("abstract")
    }

    /// The instrumentation context where the task was added (with a tracer): the parent of its
    /// spans. Written by ``TaskManagerStorage/add(_:startImmediately:delay:)`` before the box is
    /// shared.
    @exclusivity(unchecked) final var context: TaskTraceContext?

    /// Adapts and executes the task, storing the result; returns whether reactors may see it. Runs
    /// on the executor of its caller, the execution job (`nonisolated(nonsending)`: no hop on entry).
    nonisolated(nonsending) func run(adapters interceptors: [any Interceptor]) async -> Bool { fatalError("abstract") }

    /// ``run(adapters:)`` inside a span of `tracer` named after the task's type.
    func run(adapters interceptors: [any Interceptor], tracer: any TaskTracer) async -> Bool {
        fatalError("abstract")
    }

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

/// The outcome of an execution, or the error that ended a task, with the value type erased.
///
/// Not generic, so unspecialised code (``TaskBox`` is only ever called through
/// ``AnyTaskBox``) stores and moves it without looking up the metadata of a generic type such as
/// `Result<T.SuccessValue, any Error>` at run time, which costs more than the boxing. The value
/// is unboxed, with its type, only where the caller's type is needed again.
@usableFromInline
enum TaskOutcome: Sendable {
    case success(any Sendable)
    case failure(any Error)

    /// `result`, boxed.
    @inlinable
    init<Value: Sendable>(_ result: Result<Value, any Error>) {
        switch result {
        case .success(let value): self = .success(value)
        case .failure(let error): self = .failure(error)
        }
    }

    var succeeded: Bool {
        if case .success = self { return true }
        return false
    }

    /// The outcome as the caller's `Result`. The value is a `Value`: only ``TaskBox`` makes
    /// outcomes, from its task's `SuccessValue`.
    @inlinable
    func result<Value: Sendable>(as type: Value.Type) -> Result<Value, any Error> {
        switch self {
        case .success(let value): return .success(value as! Value)
        case .failure(let error): return .failure(error)
        }
    }
}

@usableFromInline
final class TaskBox<T: ManagedTask>: AnyTaskBox, @unchecked Sendable {
    // See AnyTaskBox for why `task` and `outcome` are safe, and ``awaitValue()`` for `awaiter`
    // and `answer`.
    @usableFromInline typealias Completion = @Sendable (Result<T.SuccessValue, any Error>) -> Void
    /// Calls a completion with an outcome, as the caller's `Result`. Made by the caller's code
    /// (specialised for `T`, where a closure that captures nothing allocates nothing), so that the
    /// box, only ever run unspecialised, does not look up the metadata of
    /// `Result<T.SuccessValue, any Error>` for every delivery.
    @usableFromInline typealias Delivery = @Sendable (Completion, TaskOutcome) -> Void

    @usableFromInline @exclusivity(unchecked) var task: T
    /// The latest execution's outcome.
    @usableFromInline @exclusivity(unchecked) var outcome: TaskOutcome?
    @usableFromInline let completion: Completion?
    /// Set with `completion`; see ``Delivery``.
    @usableFromInline let delivery: Delivery?
    @usableFromInline let queue: DispatchQueue?
    /// Whether the caller awaits the outcome through ``awaitValue()`` instead of a completion.
    @usableFromInline let awaited: Bool
    /// ``awaitValue()``'s hand-over: ``idle`` → ``waiting`` (the continuation is stored) or
    /// ``answered`` (the answer is stored); `waiting` → `answered`.
    @usableFromInline let handOver = Atomic<UInt8>(0)
    @usableFromInline static var idle: UInt8 { 0 }
    @usableFromInline static var waiting: UInt8 { 1 }
    @usableFromInline static var answered: UInt8 { 2 }
    /// Set by the first answer; later ones are ignored.
    @usableFromInline let answerClaimed = Atomic<Bool>(false)
    /// `@exclusivity(unchecked)`, as `answer`: the hand-over protocol (see ``awaitValue()``)
    /// orders every access to these two fields, so no two overlap, and Swift's dynamic check
    /// would cost about 140 instructions per access on the path of every awaited task.
    @usableFromInline @exclusivity(unchecked) var awaiter: UnsafeContinuation<T.SuccessValue, any Error>?
    @usableFromInline @exclusivity(unchecked) var answer: TaskOutcome?

    /// A box whose caller receives the outcome through `completion` (if any), on `queue` if given,
    /// called by `delivery`.
    @inlinable
    init(task: T, timeout: Duration?, queue: DispatchQueue?, completion: Completion?, delivery: @escaping Delivery) {
        self.task = task
        self.queue = queue
        self.completion = completion
        self.delivery = delivery
        self.awaited = false
        super.init(effectiveTimeout: timeout ?? task.timeout)
    }

    /// A box whose caller awaits the outcome with ``awaitValue()``.
    @inlinable
    init(awaiting task: T, timeout: Duration?) {
        self.task = task
        self.queue = nil
        self.completion = nil
        self.delivery = nil
        self.awaited = true
        super.init(effectiveTimeout: timeout ?? task.timeout)
    }

    override func intercept(_ interceptors: [any Interceptor], batchCounts: [Int]) -> InterceptVerdict {
        var verdict = InterceptVerdict()
        for index in interceptors.indices {
            let count = batchCounts[index]
            let command = interceptors[index].intercept(task: &task, currentBatchCount: count)
            verdict.record(command, from: index, batchCount: count)
        }
        return verdict
    }

    override var succeeded: Bool { outcome?.succeeded ?? false }

    override func run(adapters interceptors: [any Interceptor], tracer: any TaskTracer) async -> Bool {
        await tracer.withInternalSpan(String(describing: T.self), parent: context) { span in
            let reactable = await run(adapters: interceptors)
            if case .failure(let error)? = outcome { span.recordFailure(error) }
            return reactable
        }
    }

    override nonisolated(nonsending) func run(adapters interceptors: [any Interceptor]) async -> Bool {
        let task = self.task
        do {
            for interceptor in interceptors {
                try await interceptor.adapt(task: task)
            }
        } catch {
            outcome = .failure(error)
            return false
        }
        do {
            outcome = .success(try await task.execute())
        } catch {
            outcome = .failure(error)
        }
        return true
    }

    override func shouldReact(_ reactor: any Reactor, handle: TaskHandle) -> Bool {
        guard let outcome else { return false }
        return reactor.shouldExecute(after: outcome.result(as: T.SuccessValue.self), from: task, with: handle)
    }

    override func deliverResult(then returned: @escaping @Sendable () -> Void) {
        // A stale execution never reaches here: the machine delivers only a reported result,
        // once, so the outcome is moved out.
        guard let outcome = outcome.take() else { return returned() }
        answer(outcome, then: returned)
    }

    override func terminate(with error: TaskError, then returned: @escaping @Sendable () -> Void) {
        task.didCancel(with: error)
        answer(.failure(error), then: returned)
    }

    /// Suspends until the box is answered (at once if it was); returns the value or throws the
    /// error. Called once, by the caller of a box made with ``init(awaiting:timeout:)``.
    ///
    /// The continuation is resumed exactly once. The caller stores it, then moves ``handOver``
    /// from `idle` to `waiting`. The first answer (the only one past ``answerClaimed``) resumes
    /// it at once if it finds `waiting`; otherwise it stores the answer (boxed, as a
    /// ``TaskOutcome``), then tries to move `handOver` from `idle` to `answered`. Whichever of
    /// the two moves comes second resumes, and it reads the field the other wrote before its move
    /// (acquiring and releasing ordering on every move and read): the caller resumes when its
    /// move fails (moving the stored answer out), the answer when its move fails (then the caller
    /// never reads the stored answer, which the answer clears). So each field is written before
    /// it is read, and never accessed concurrently. The usual order (the caller waits first)
    /// hands the typed value over without boxing it.
    @inlinable
    func awaitValue() async throws -> T.SuccessValue {
        try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<T.SuccessValue, any Error>) in
            awaiter = continuation
            let (exchanged, _) = handOver.compareExchange(
                expected: Self.idle, desired: Self.waiting, ordering: .acquiringAndReleasing
            )
            if !exchanged, let answer = answer.take() { Self.resume(continuation, with: answer) }
        }
    }

    /// The manager and the task's identifier, for the job of the direct lane: written by
    /// ``TaskManager/spawnDirectExecution(box:id:)`` before it spawns the job (creating the
    /// Swift task orders the write before every read), read and cleared only by that job.
    @usableFromInline @exclusivity(unchecked) var directLane: (storage: TaskManagerStorage, id: Int)?

    /// The job of the direct lane (``TaskManager/value(of:after:timeout:)``,
    /// ``TaskManager/add(task:startImmediately:after:timeout:completeOn:completion:)``), for a
    /// task the manager registered as executing (``TaskManagerStorage/addDirectly(_:)``): runs
    /// the adapters and the task as the interceptors left it (the manager's lock orders the
    /// interception before the spawn), reports the end to the manager, and when the manager
    /// grants the delivery hands the typed result to the caller.
    @inlinable
    func executeDirectly() async {
        guard let (storage, id) = directLane else { preconditionFailure("direct lane job without its manager") }
        // The box outlives the job in the manager's list of retired boxes: it must not hold the manager.
        directLane = nil
        let task = self.task  // as the interceptors left it: the manager's lock orders them first
        let result: Result<T.SuccessValue, any Error>
        do {
            for adapter in storage.interceptors {
                try await adapter.adapt(task: task)
            }
            result = .success(try await task.execute())
        } catch {
            result = .failure(error)
        }
        if storage.directExecutionEnded(id: id) {
            deliverDirectly(result, reportingTo: storage)
        }
    }

    /// Delivers `result` of an execution that the caller's code spawned (the direct lane of
    /// ``TaskManager/value(of:after:timeout:)`` and ``TaskManager/add(task:startImmediately:after:timeout:completeOn:completion:)``)
    /// to the caller, as ``deliverResult(then:)`` does a stored outcome, then reports the
    /// delivery's return to `storage`. Specialised in the caller's module: the value reaches the
    /// caller's continuation or completion typed, without boxing.
    @inlinable
    func deliverDirectly(_ result: Result<T.SuccessValue, any Error>, reportingTo storage: TaskManagerStorage) {
        if awaited {
            answerAwaiter(with: result)
            return storage.deliveryReturned(retiring: self)
        }
        guard let completion else { return storage.deliveryReturned(retiring: self) }
        if let queue {
            queue.async {
                completion(result)
                storage.deliveryReturned(retiring: self)
            }
        } else {
            completion(result)
            storage.deliveryReturned(retiring: self)
        }
    }

    /// Answers the caller of ``awaitValue()`` with `result`, unless it was answered already.
    /// Specialised in the caller's module (the execution job of
    /// ``TaskManager/value(of:after:timeout:)``'s direct lane), so a value usually reaches its
    /// caller without boxing.
    @inlinable
    func answerAwaiter(with result: Result<T.SuccessValue, any Error>) {
        if let awaiter = claimAwaiter(storing: TaskOutcome(result)) { awaiter.resume(with: result) }
    }

    /// Claims the answer (see ``awaitValue()``): returns the continuation to resume now, or `nil`
    /// when the answer was stored for the caller (`outcome` is evaluated only then) or another
    /// answer came first.
    @inlinable
    func claimAwaiter(storing outcome: @autoclosure () -> TaskOutcome) -> UnsafeContinuation<T.SuccessValue, any Error>? {
        guard !answerClaimed.exchange(true, ordering: .relaxed) else { return nil }
        if handOver.load(ordering: .acquiring) != Self.waiting {
            answer = outcome()
            let (stored, _) = handOver.compareExchange(
                expected: Self.idle, desired: Self.answered, ordering: .acquiringAndReleasing
            )
            if stored { return nil }
            answer = nil  // the caller began waiting meanwhile: it will not read it
        }
        return awaiter
    }

    /// Resumes `continuation` with `outcome`, unboxing the value (a `T.SuccessValue`: only
    /// this box makes its outcomes).
    @inlinable
    static func resume(_ continuation: UnsafeContinuation<T.SuccessValue, any Error>, with outcome: TaskOutcome) {
        switch outcome {
        case .success(let value): continuation.resume(returning: value as! T.SuccessValue)
        case .failure(let error): continuation.resume(throwing: error)
        }
    }

    private func answer(_ outcome: TaskOutcome, then returned: @escaping @Sendable () -> Void) {
        if awaited {
            if let awaiter = claimAwaiter(storing: outcome) { Self.resume(awaiter, with: outcome) }
            return returned()
        }
        complete(with: outcome, then: returned)
    }

    /// Calls the completion, if any, with `outcome`, through ``delivery``.
    private func complete(with outcome: TaskOutcome, then returned: @escaping @Sendable () -> Void) {
        guard let completion, let delivery else { return returned() }
        if let queue {
            queue.async {
                delivery(completion, outcome)
                returned()
            }
        } else {
            delivery(completion, outcome)
            returned()
        }
    }
}
