import Dispatch
import Synchronization

/// A result that will be provided later: thread-safe, chainable and cancellable.
///
/// A `CoFuture` is completed exactly once, with a success value or an error. You observe it with
/// callbacks (``whenComplete(_:)``, ``whenSuccess(_:)``, ``whenFailure(_:)``,
/// ``whenCancelled(_:)``), derive new futures from it (``map(_:)``, ``flatMap(_:)`` and their error
/// counterparts), await it (``value``), or cancel it (``cancel()``). Complete one through its
/// subclass ``CoPromise``.
///
/// ```swift
/// func fetchUser(id: Int) -> CoFuture<User> {
///     let promise = CoPromise<User>()
///     let request = api.loadUser(id: id) { result in promise.complete(with: result) }
///     promise.whenCancelled { request.cancel() }   // cancelling the future cancels the request
///     return promise
/// }
///
/// let name = fetchUser(id: 42).map(\.name)
/// name.whenSuccess { print("Hello, \($0)") }
/// let again = try await name.value
/// ```
///
/// ## Semantics
///
/// - **First completion wins.** Later completions, and ``cancel()`` on a completed future, do nothing.
/// - **Callbacks run exactly once, in registration order.** A callback added to a pending future
///   runs on the thread that completes it; a callback added to a completed future runs at once
///   on the caller's thread. No lock is held while any callback runs.
/// - **Cancellation runs through the chain.** ``cancel()`` completes a pending future with
///   ``CoFutureError/cancelled``, runs its ``whenCancelled(_:)`` handlers, and cancels the future
///   it was derived from, and so on up the chain; the other futures derived from those are
///   cancelled in turn, because the cancellation error flows down to them.
/// - **Nothing waits forever.** A pending future that is deallocated (typically a ``CoPromise``
///   dropped by its producer) completes its observers with ``CoFutureError/cancelled``.
///   Futures derived from a promise do not keep it alive, so holding them does not keep an
///   abandoned promise alive (see *Ownership* below).
/// - **Bounded stack depth.** Completing a chain of any length, or a future with any number of
///   observers, recurses at most a few levels and runs the rest iteratively: a chain of
///   100,000 `map`s does not overflow the stack.
///
/// ## Ownership
///
/// Who holds whom, and when each reference is dropped (nothing else holds a future):
///
/// - **A future holds what it must complete.** Its callback list holds, strongly, every callback
///   and every future derived from it (`map`, `flatMap`, the error transforms) or forwarding it
///   (a `flatMap` waiting for it as its inner future, a promise told to complete with it). The
///   list is emptied as the future completes: each callback is released after it runs.
/// - **A future holds what it would cancel**, its *upstream* link: the future it was derived
///   from, then, for a `flatMap`, the inner future it waits for; for a promise, the future it
///   forwards. The link is dropped when the future completes or is cancelled (or, for a
///   `flatMap` whose transform returns the `flatMap` itself, when that happens).
///   - To a ``CoPromise`` the link is **weak**: a promise is kept alive by its producer alone,
///     so when the producer drops it uncompleted, it deinitialises and cancels everything
///     waiting on it even while derived futures are held. A cancel that finds the weak link
///     empty stops there: the promise has gone, and has cancelled its observers on the way.
///   - To any other future the link is **strong**. That creates no lifetime of its own: such a
///     future is pending only while something will complete it (its own source's callback
///     list, the task or queue running its work, an inner future's list), and that something
///     holds it until then. The cycle this forms with the source's callback list is broken when
///     either side completes.
/// - **Callbacks run outside every lock**, and a link or callback released by a transition is
///   released after the lock is released, so no `deinit` (which may run callbacks) runs under it.
///
/// So a chain hanging off an abandoned promise is freed: the promise deinitialises, completes
/// its derived futures with ``CoFutureError/cancelled``, each drops its link as it completes, and
/// the callback lists empty as they run.
///
/// `CoFuture` is `Hashable` by identity.
public class CoFuture<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable is sound: `machine`, the result fields (`erasedValue` or a
    // `TypedFuture`'s `stored`, and `storedError`) and `weakUpstream` are written only
    // while `lock` is held. `machine` is read only under the lock. The result fields are written
    // once, in the critical section that completes the future, before the releasing store of
    // `stateBits` that publishes the completed bit, and never written again; they are read under
    // the lock or after an acquiring load of `stateBits` has seen that bit.

    @usableFromInline
    final let lock = FutureLock()

    /// The machine's phase (``CoFuturePhase`` raw value: bit 1 *completed*, bit 2 *draining*),
    /// mirrored by a releasing store after every other write of each critical section that
    /// changes it. The read-only checks (`result`, `settledResult()`,
    /// `isCompletedBit`, `deinit`) read it with an acquiring load instead of taking the lock.
    @usableFromInline
    final let stateBits: Atomic<UInt8>

    // The fields below are `@exclusivity(unchecked)`: Swift's dynamic exclusivity check on class
    // properties costs a thread-local access-set insert per access. Skipping it is sound because
    // each write happens inside `lock.withLock`, whose closures never re-enter the future (no
    // user code runs under the lock), so two accesses to one field never overlap; the lock-free
    // reads read result fields that are never written again.

    /// The states and transitions; guarded by `lock`.
    @usableFromInline @exclusivity(unchecked)
    final var machine: CoFutureStateMachine<Value>

    /// The promise this future links to for cancellation when its machine's link is `.weak`
    /// (see *Ownership*); guarded by `lock`. Left set once unused (it keeps nothing alive).
    ///
    /// Only the futures that can link to a promise (`DerivedFuture`, ``CoPromise``) store one,
    /// by overriding this property: a weak field costs two runtime calls per future, to create
    /// and destroy it, which a ready result or a task's future need not pay.
    @usableFromInline
    var weakUpstream: (AnyObject & Sendable)? {
        get { nil }
        set { preconditionFailure("only a DerivedFuture or a CoPromise links to a promise") }
    }

    /// The success value of a future whose class is not a ``TypedFuture`` (a ``CoPromise``, or a
    /// future made by one of `CoFuture`'s public initialisers). Type-erased, because a field
    /// whose type is built from `Value` (such as `Value?`) makes the unspecialised `deinit` of
    /// every future look up that type's metadata at run time, ~330 instructions; reading it back
    /// costs a dynamic cast instead. `TypedFuture`s keep theirs typed, without that lookup.
    /// Unset, it holds `()` rather than being an optional: destroying or testing an empty
    /// optional existential goes through the existential's value witnesses on every future.
    @usableFromInline @exclusivity(unchecked)
    final var erasedValue: any Sendable

    /// The error once the future failed.
    @usableFromInline @exclusivity(unchecked)
    final var storedError: (any Error)?

    /// Whether this future is a `TypedFuture<Value, Value?>`, which keeps its success value in its
    /// own typed field. Set once by the initialiser.
    @usableFromInline
    final let storesTyped: Bool

    /// Creates a future completed with `result`, or pending if it is `nil`. With `typed`, the
    /// caller is a `TypedFuture` that has already stored the success value in its own field.
    @inlinable
    init(completedWith result: Result<Value, any Error>?, typed: Bool = false) {
        stateBits = Atomic(result == nil ? CoFuturePhase.pending.rawValue : CoFuturePhase.settled.rawValue)
        machine = CoFutureStateMachine(completed: result != nil)
        storesTyped = typed
        switch result {
        case .success(let value)?:
            if typed { erasedValue = () } else { erasedValue = value }
            storedError = nil
        case .failure(let error)?:
            erasedValue = ()
            storedError = error
        case nil:
            erasedValue = ()
            storedError = nil
        }
    }

    /// Creates a pending `TypedFuture` with the upstream link `link` (see `DerivedFuture`, which
    /// has stored a `.weak` link's target already). The link is set while the new future is
    /// still private to its initialisers, so without the lock.
    @inlinable
    init(pendingWith link: consuming UpstreamLink) {
        stateBits = Atomic(CoFuturePhase.pending.rawValue)
        machine = CoFutureStateMachine(completed: false, upstream: link)
        storesTyped = true
        erasedValue = ()
        storedError = nil
    }

    /// Creates a future that is already completed with `result`.
    ///
    /// - Parameter result: The result provided by this future.
    @inlinable
    public convenience init(result: Result<Value, any Error>) {
        self.init(completedWith: result)
    }

    /// Creates a future that is already completed with a success value.
    ///
    /// - Parameter value: The value provided by this future.
    @inlinable
    public convenience init(value: Value) {
        self.init(completedWith: .success(value))
    }

    /// Creates a future that is already completed with an error.
    ///
    /// - Parameter error: The error provided by this future.
    @inlinable
    public convenience init(error: any Error) {
        self.init(completedWith: .failure(error))
    }

    deinit {
        // Nobody else can reach this future any more; complete whoever still waits on it.
        // Fast path: a completed future has nothing left to do (every write to its fields
        // precedes the releasing store of `stateBits` that this acquiring load sees).
        if isCompletedBit { return }
        completeOrphans()
    }

    /// Runs the callbacks of a future deallocated while pending with ``CoFutureError/cancelled``.
    @usableFromInline
    final func completeOrphans() {
        var orphans = CallbackBatch<Value>()
        guard lock.withLock(self, { machine.abandon(into: &orphans) }) else { return }
        var queue = DrainQueue()
        run(&orphans, with: .failure(CoFutureError.cancelled), into: &queue)
        queue.drainAll()
    }

    // MARK: - State

    /// The result, or `nil` while the future is pending.
    @inlinable
    public final var result: Result<Value, any Error>? {
        isCompletedBit ? storedResult : nil
    }

    /// Whether the future completed with ``CoFutureError/cancelled``.
    @inlinable
    public final var isCancelled: Bool {
        guard case .failure(let error) = result else { return false }
        return error.isCoFutureCancellation
    }

    /// Cancels this future and the chain it was derived from.
    ///
    /// If the future is pending, it completes with ``CoFutureError/cancelled``: its
    /// ``whenCancelled(_:)`` handlers and other callbacks run, then the future it was derived from
    /// (its `map`/`flatMap` source, the inner future a `flatMap` waits for, or the future a
    /// ``CoPromise`` was told to forward) is cancelled in the same way, up the whole chain.
    /// Futures derived from those receive the cancellation error as their result.
    /// Cancelling a completed future does nothing.
    public final func cancel() {
        var next = cancelReturningUpstream()
        while let future = next {  // iterative: a long chain cannot overflow the stack
            next = future.cancelReturningUpstream()
        }
    }

    // MARK: - Observing

    /// Adds a callback that receives the result, whatever it is.
    ///
    /// Runs once: at once on the caller's thread if the future is complete, otherwise on the
    /// thread that completes it. Callbacks run in the order they were added.
    ///
    /// - Parameter callback: The callback that is called when the future completes.
    @inlinable
    public final func whenComplete(_ callback: @escaping @Sendable (Result<Value, any Error>) -> Void) {
        add(.result(callback))
    }

    /// Adds a callback that receives the value if the future succeeds.
    ///
    /// - Parameter callback: The callback that is called with the success value.
    @inlinable
    public final func whenSuccess(_ callback: @escaping @Sendable (Value) -> Void) {
        add(.success(callback))
    }

    /// Adds a callback that receives the error if the future fails (including cancellation).
    ///
    /// - Parameter callback: The callback that is called with the error.
    @inlinable
    public final func whenFailure(_ callback: @escaping @Sendable (any Error) -> Void) {
        add(.failure(callback))
    }

    /// Adds a callback that runs if the future is cancelled (completes with ``CoFutureError/cancelled``).
    ///
    /// - Parameter callback: The callback that is called on cancellation.
    @inlinable
    public final func whenCancelled(_ callback: @escaping @Sendable () -> Void) {
        add(.cancelled(callback))
    }

    // MARK: - Internals shared by the transforms, the promise and the async bridge

    /// Whether a result is set (even if callbacks are still being drained).
    @inlinable
    final var isCompletedBit: Bool {
        stateBits.load(ordering: .acquiring) & CoFuturePhase.completedBit != 0
    }

    /// The result if the future is complete and all earlier callbacks have run; `nil` otherwise.
    /// Work that would be a callback may then run at once without breaking registration order.
    @inlinable
    final func settledResult() -> Result<Value, any Error>? {
        stateBits.load(ordering: .acquiring) == CoFuturePhase.settled.rawValue ? storedResult : nil
    }

    /// The stored result. Only valid once the completed bit has been seen.
    @inlinable
    final var storedResult: Result<Value, any Error> {
        // Success first: it is the common case, and it then never loads the error field.
        if storesTyped {
            if let value = typedSelf.stored { return .success(value) }
        } else if storedError == nil {
            return .success(erasedSuccessValue)
        }
        return .failure(storedError!)  // completed, and not with a value
    }

    /// The success value kept in `erasedValue` (only valid once the future succeeded, for a
    /// future that does not store it typed).
    ///
    /// `erasedValue` is only ever assigned a `Value`, so the type it holds is `Value` itself,
    /// or, when `Value` is an existential or a class, a type whose values convert to `Value`.
    /// Opening the existential gives that type as `T`; when it is exactly `Value` (the same
    /// metadata), reinterpreting the `T` as a `Value` is the identity, and avoids the runtime's
    /// general cast (~250 instructions per read). Any other `T` takes the checked cast.
    @inlinable
    final var erasedSuccessValue: Value {
        func open<T>(_ value: T) -> Value {
            if T.self == Value.self { return unsafeBitCast(value, to: Value.self) }
            return value as! Value  // a conversion (existential or subclass): checked
        }
        return open(erasedValue)
    }

    /// Writes the result. Only under the lock, in the critical section that completes.
    @inlinable
    final func store(_ result: Result<Value, any Error>) {
        switch result {
        case .success(let value):
            if storesTyped { typedSelf.stored = value } else { erasedValue = value }
        case .failure(let error): storedError = error
        }
    }

    /// This future as the `TypedFuture` it is when `storesTyped` is set.
    ///
    /// `unsafeDowncast` (checked in debug builds, where the tests run) rather than `as!`, whose
    /// class cast costs ~30 instructions per access. Sound: callers
    /// read it only when `storesTyped` is true; that `let` is true only when set by
    /// `TypedFuture`'s initialisers (through `init(completedWith:typed:)` and
    /// `init(pendingDerivedFrom:)`, which only they call), and those require `Stored == Value?`.
    @inlinable
    final var typedSelf: TypedFuture<Value, Value?> {
        unsafeDowncast(self, to: TypedFuture<Value, Value?>.self)
    }

    /// Publishes the machine's phase to the lock-free readers. Last write of a critical section.
    @inlinable
    final func publishPhase() {
        stateBits.store(machine.phase.rawValue, ordering: .releasing)
    }

    /// Registers `callback`, or, if the future is settled, hands it to `settled` with the result
    /// (after the lock is released).
    ///
    /// The callback is moved into the list, not copied: it goes into the closure as an optional
    /// that the closure empties (a closure can only borrow a `consuming` parameter, and storing
    /// a borrowed callback would copy it, a retain and a release per registration).
    @inlinable @inline(__always)
    final func append(
        _ callback: consuming FutureCallback<Value>,
        orIfSettled settled: (consuming FutureCallback<Value>, Result<Value, any Error>) -> Void
    ) {
        // Settled is final, and means every earlier callback has run: run this one now, without
        // the lock (the acquiring load orders the result's reads after its writes).
        if let result = settledResult() {
            settled(callback, result)
            return
        }
        var moving = Optional(callback)
        let action = lock.withLock(self) { machine.register(moving.take()!) }
        guard case .runNow(let callback) = consume action else { return }
        settled(callback, storedResult)
    }

    /// Registers `callback`, or runs it at once (queueing any follow-up work on `queue`).
    @inlinable
    final func add(_ callback: consuming FutureCallback<Value>, into queue: inout DrainQueue) {
        append(callback) { callback, result in
            callback.run(result, into: &queue)
        }
    }

    /// Registers `callback`, or runs it at once and drains whatever that completes.
    @inlinable
    final func add(_ callback: consuming FutureCallback<Value>) {
        append(callback) { callback, result in
            // A user callback completes nothing else: run it without a drain queue.
            if callback.runIfUserCallback(result) { return }
            // Only here is a drain queue needed: creating and destroying an empty one on every
            // registration costs about as much as the registration itself.
            var queue = DrainQueue()
            queue.runningLast = true  // the only callback run here: nothing to reorder
            callback.run(result, into: &queue)
            queue.drainAll()
        }
    }

    /// Completes the future and runs every callback that follows from it, in bounded stack depth.
    @inlinable
    final func completeAndRunCallbacks(_ result: Result<Value, any Error>) {
        var queue = DrainQueue()
        queue.runningLast = true  // nothing else is queued
        completeAndDrain(result, into: &queue)
        queue.drainAll()
    }

    /// Completes the future with `result` (unless it is already complete) and runs its
    /// callbacks, now if that cannot change the order in which callbacks run, otherwise after
    /// the callbacks already queued.
    ///
    /// The order is breadth first: when a callback completes a derived future, the callbacks
    /// after it in the same batch run before the derived future's own callbacks. So a derived
    /// future is drained at once (depth first) only when it was completed by the *last*
    /// callback of its source's batch (`queue.runningLast`), and only up to
    /// `DrainQueue.maximumDepth` levels, so that a chain of any length still runs in bounded
    /// stack depth. Otherwise it is queued. Draining at once takes the first batch in the
    /// critical section that sets the result, and saves pushing and popping a drain step.
    ///
    /// One order does differ from queueing everything: a callback registered on the source
    /// *while* its callbacks run (so queued behind them on the source) runs after the callbacks
    /// of a future completed by the batch's last callback. The order of each future's own
    /// callbacks is the same either way.
    @inlinable
    final func completeAndDrain(_ result: Result<Value, any Error>, into queue: inout DrainQueue) {
        let atOnce = queue.runningLast && queue.depth < DrainQueue.maximumDepth
        var batch = CallbackBatch<Value>()
        let action = lock.withLock(self) { () -> CoFutureStateMachine<Value>.CompleteAction in
            let action = machine.complete(takingBatch: atOnce, into: &batch)
            if case .completed = action {
                store(result)
                publishPhase()
            }
            return action
        }
        guard case .completed = consume action else { return }
        // The released upstream link (the action's payload) was dropped just now, unlocked.
        guard atOnce else {
            queue.push(drainStep)
            return
        }
        guard batch.first != nil else { return }  // no callbacks: settled already
        queue.depth += 1
        defer { queue.depth -= 1 }
        run(&batch, with: result, into: &queue)
        drain(into: &queue)  // callbacks registered meanwhile; settles the future
    }

    /// Runs one batch of callbacks in order, moving each out of `batch` first, and telling each
    /// whether it is the batch's last (`DrainQueue.runningLast`, see `completeAndDrain`).
    @inlinable @inline(__always)
    final func run(
        _ batch: inout CallbackBatch<Value>,
        with result: Result<Value, any Error>,
        into queue: inout DrainQueue
    ) {
        guard let first = batch.first.take() else { return }
        queue.runningLast = batch.second == nil
        first.run(result, into: &queue)
        guard let second = batch.second.take() else { return }
        queue.runningLast = batch.third == nil
        second.run(result, into: &queue)
        guard let third = batch.third.take() else { return }
        queue.runningLast = batch.rest == nil
        third.run(result, into: &queue)
        guard let rest = batch.rest.take() else { return }
        for index in rest.indices {
            queue.runningLast = index == rest.index(before: rest.endIndex)
            rest[index].run(result, into: &queue)
        }
    }

    /// Runs the batches registered while draining until none is left; the future then settles.
    @inlinable
    final func drain(into queue: inout DrainQueue) {
        // Usually nothing was registered meanwhile: settle without materialising a batch.
        if lock.withLock(self, { () -> Bool in
            guard machine.settleIfDrained() else { return false }
            publishPhase()
            return true
        }) {
            return
        }
        var batch = CallbackBatch<Value>()
        while lock.withLock(self, { () -> Bool in
            guard machine.takeNextBatch(&batch) else {
                publishPhase()
                return false
            }
            return true
        }) {
            run(&batch, with: storedResult, into: &queue)
        }
    }

    /// Replaces the upstream link with one to `upstream` if the future is still pending; returns
    /// whether it is pending. The caller then registers this future's `.forward` on `upstream`.
    @inlinable
    final func relinkUpstream<Upstream>(to upstream: CoFuture<Upstream>) -> Bool {
        let (link, weakTarget) = UpstreamLink.to(upstream)
        let (pending, released) = lock.withLock(self) { () -> (Bool, UpstreamLink) in
            let (pending, released) = machine.relink(link)
            if pending, let weakTarget { weakUpstream = weakTarget }
            return (pending, released)
        }
        _ = consume released  // dropped here, unlocked
        return pending
    }
}

extension CoFuture: CancellableFuture {
    /// This future as a drain-loop step (see `ErasedStep`).
    @inlinable
    final var drainStep: ErasedStep<Void> {
        ErasedStep(self) { object, _, queue in
            recoverObject(object, as: CoFuture<Value>.self).drain(into: &queue)
        }
    }

    @usableFromInline
    final func cancelReturningUpstream() -> (any CancellableFuture)? {
        let (cancelled, next) = lock.withLock(self) { () -> (Bool, (AnyObject & Sendable)?) in
            guard case .cancelled(let link) = machine.cancel() else { return (false, nil) }
            store(.failure(CoFutureError.cancelled))
            publishPhase()
            switch link {
            case .none: return (true, nil)
            case .strong(let future): return (true, future)
            case .weak: return (true, weakUpstream)  // a retain at most; released after unlocking
            }
        }
        guard cancelled else { return nil }
        var queue = DrainQueue()
        drain(into: &queue)
        queue.drainAll()
        // Cast after unlocking (a conformance lookup); every link is a CoFuture.
        return next.map { $0 as! any CancellableFuture }
    }
}

extension CoFuture: Hashable {
    /// Two futures are equal when they are the same instance.
    public static func == (lhs: CoFuture, rhs: CoFuture) -> Bool {
        lhs === rhs
    }

    /// Hashes the future's identity.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }
}

extension CoFuture {
    /// Starts `operation` in a new `Task` and returns a future of its result.
    ///
    /// Cancelling the future cancels the task. If the operation throws, the future fails with
    /// that error.
    ///
    /// ```swift
    /// let profile = CoFuture { try await api.profile() }
    /// ```
    ///
    /// - Parameters:
    ///   - priority: The priority of the task.
    ///   - operation: The work whose result the future provides.
    public convenience init(
        priority: TaskPriority? = nil,
        operation: @escaping @Sendable () async throws -> Value
    ) {
        self.init(completedWith: nil)
        let task = Task(priority: priority) { [self] in
            guard !isCompletedBit else { return }  // cancelled before it started: the cancel wins
            let result: Result<Value, any Error>
            do {
                result = .success(try await operation())
            } catch {
                result = .failure(error)
            }
            completeAndRunCallbacks(result)
        }
        add(.cancelled { task.cancel() })
    }

    /// Calls `promise` at once with a callback that completes the returned future.
    ///
    /// This turns a callback API into a future: pass a function that takes a completion callback.
    /// Only the first call of the callback counts; a call after the future was cancelled is
    /// ignored. If the callback is never called, the future stays pending until cancelled.
    ///
    /// ```swift
    /// func loadConfig(completion: @escaping @Sendable (Result<Config, any Error>) -> Void) { … }
    ///
    /// let config = CoFuture(promise: loadConfig)
    /// ```
    ///
    /// - Parameter promise: Starts the work and calls the callback it is given with the outcome.
    public convenience init(promise: (@escaping @Sendable (Result<Value, any Error>) -> Void) -> Void) {
        self.init(completedWith: nil)
        promise { [self] result in completeAndRunCallbacks(result) }
    }

    /// Runs `body` on `queue` and returns a future of its result.
    ///
    /// If the future is cancelled before `body` starts, `body` does not run.
    ///
    /// ```swift
    /// let thumbnail = CoFuture(on: .global()) { try renderThumbnail(image) }
    /// ```
    ///
    /// - Parameters:
    ///   - queue: The queue to run `body` on.
    ///   - body: The synchronous work whose result the future provides.
    public convenience init(on queue: DispatchQueue, execute body: @escaping @Sendable () throws -> Value) {
        self.init(completedWith: nil)
        queue.async { [self] in
            guard !isCompletedBit else { return }
            completeAndRunCallbacks(Result(catching: body))
        }
    }
}

extension UpstreamLink {
    /// The link to `future`: `.weak` if it is a ``CoPromise``, with `future` as the weak target
    /// the linking future keeps in `weakUpstream`; `.strong(future)` otherwise (see ``CoFuture``).
    @inlinable
    static func to<Value>(_ future: CoFuture<Value>) -> (link: UpstreamLink, weakTarget: (AnyObject & Sendable)?) {
        // `CoPromise` is final, so comparing the exact class is the same as `is CoPromise<Value>`.
        if ObjectIdentifier(type(of: future)) == ObjectIdentifier(CoPromise<Value>.self) {
            return (.weak, future)
        }
        return (.strong(future), nil)
    }
}

extension Error {
    /// Whether this error is ``CoFutureError/cancelled``.
    @inlinable
    var isCoFutureCancellation: Bool {
        (self as? CoFutureError) == .cancelled
    }
}
