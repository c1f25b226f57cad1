import Dispatch
import Synchronization

/// A result that will be provided later: thread-safe, chainable and cancellable.
///
/// A `CoFuture` is completed exactly once, with a success value or an error. You observe it with
/// callbacks (``whenComplete(_:)``, ``whenSuccess(_:)``, ``whenFailure(_:)``,
/// ``whenCanceled(_:)``), derive new futures from it (``map(_:)``, ``flatMap(_:)`` and their error
/// counterparts), await it (``value``), or cancel it (``cancel()``). Complete one through its
/// subclass ``CoPromise``.
///
/// ```swift
/// func fetchUser(id: Int) -> CoFuture<User> {
///     let promise = CoPromise<User>()
///     let request = api.loadUser(id: id) { result in promise.complete(with: result) }
///     promise.whenCanceled { request.cancel() }   // cancelling the future cancels the request
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
///   ``CoFutureError/canceled``, runs its ``whenCanceled(_:)`` handlers, and cancels the future
///   it was derived from, and so on up the chain; the other futures derived from those are
///   cancelled in turn, because the cancellation error flows down to them.
/// - **Nothing waits forever.** A pending future that is deallocated (typically a ``CoPromise``
///   dropped by its producer) completes its observers with ``CoFutureError/canceled``.
///   A derived future does not keep the future it came from alive, so holding it does not keep
///   an abandoned promise alive. (Any other source is kept alive, while pending, by whatever will
///   complete it, and completes whenever what it depends on completes or is abandoned.)
/// - **Bounded stack depth.** Completing a chain of any length, or a future with any number of
///   observers, recurses at most a few levels and runs the rest iteratively: a chain of
///   100,000 `map`s does not overflow the stack.
///
/// `CoFuture` is `Hashable` by identity.
public class CoFuture<Value: Sendable>: _CoFutureStorage<Value?>, @unchecked Sendable {
    // @unchecked Sendable is sound: every stored `var` below, and the inherited `_value`, is
    // written only while `_lock` is held, and read either under the lock or, for `_value` and
    // `_error` (together: `_result`), after an acquiring load of `_state` has seen the completed
    // bit (see `_state`).
    // `_lock` is an `Atomic`-based lock with acquire/release ordering (see FutureLock.swift),
    // which publishes each write to the next holder.

    @usableFromInline
    final let _lock = FutureLock()

    // The mutable fields below are `@exclusivity(unchecked)`: Swift's dynamic exclusivity check
    // on class properties costs a thread-local access-set insert per access (about a sixth of
    // the seed workload's instructions). It is sound to skip it because every write happens
    // inside `_lock.withLock`, whose closures never re-enter the future (they only load, store
    // or append; no user code runs under the lock), so two accesses to one field never overlap;
    // the one lock-free access, reading `_result` after its completed bit was seen, reads a value
    // that is never written again.

    /// Callbacks waiting for the result, in registration order. Guarded by `_lock`.
    @usableFromInline @exclusivity(unchecked)
    final var _callbacks = _CallbackList<Value>()

    /// Two bits (`_StateBits`): *completed*, whether `_result` holds the result, and *draining*,
    /// true from completion until every callback registered so far has run (while it is set, new
    /// callbacks queue behind the pending ones, which keeps registration order). Changed only
    /// under `_lock`, always by a releasing store that comes after every other write of that
    /// critical section; so the hot read-only checks (`_settledResult`, `_isCompleted`, `result`,
    /// `deinit`) skip the lock with an acquiring load and still see everything written before
    /// the bit they test (ThreadSanitizer understands both sides). Not generic, so `deinit`
    /// (TaskKit's unspecialised code) reads it without generic metadata.
    @usableFromInline
    final let _state: Atomic<UInt8>

    /// The error if the future failed; the value, if it succeeded, is the inherited `_value`.
    /// Two fields rather than one `Result<Value, Error>?`: the unspecialised `deinit` destroys a
    /// `Value?` through its value witness in a few instructions, where a `Result?` needs the
    /// multi-payload enum machinery of the runtime (about 70 instructions more per future).
    /// Written and read like `_result`, which combines them.
    @usableFromInline @exclusivity(unchecked)
    final var _error: (any Error)?

    /// The result, `nil` while pending: `_value` and `_error` combined. Written only under
    /// `_lock` while pending; read under it, or after an acquiring load of `_state` has seen
    /// the completed bit.
    @inlinable
    final var _result: Result<Value, any Error>? {
        get {
            if let error = _error { return .failure(error) }
            if let value = _value { return .success(value) }
            return nil
        }
        set {
            switch newValue {
            case .success(let value)?:
                _value = value
                _error = nil
            case .failure(let error)?:
                _value = nil
                _error = error
            case nil:
                _value = nil
                _error = nil
            }
        }
    }

    /// The future that ``cancel()`` cancels next: the one this future was derived from, the
    /// inner future a `flatMap` now waits for, or the future a promise forwards. Set only while
    /// this future is pending, cleared when it completes or is cancelled. Guarded by `_lock`.
    ///
    /// Held without a reference count, so linking and unlinking cost nothing, and read with
    /// `swift_tryRetain` (`_retainUpstream`), which yields a strong reference unless the target
    /// has started to deinitialise. Both halves need an argument:
    ///
    /// - *The target's memory is allocated whenever the link is read.* It is read only under
    ///   `_lock` and only while this future is pending. This future is pending until its target
    ///   runs the entry that completes it (the `.transform` that `map`/`flatMap`/`recover`
    ///   register on their source, the `.forward` that `flatMap` and `complete(with:)` register
    ///   on the future they follow), and running that entry completes this future, re-links it
    ///   to an inner future, or clears the link (a `flatMap` told to wait for itself), each
    ///   under `_lock`. The target holds the entry in its callback list until it runs it: in a drain,
    ///   while its caller holds the target; or, if the target is deallocated while pending, in
    ///   its `deinit`, before its memory is freed. Between setting the link and registering
    ///   the entry, the code doing both holds the target (`map`'s `self`, `_follow`'s `inner`,
    ///   `complete(with:)`'s argument). So while we hold `_lock` and see this future pending,
    ///   the target cannot have got past running our entry, and its memory is still allocated.
    /// - *The target may be deinitialising* (a promise dropped by its producer: its `deinit`
    ///   is about to complete this future with `.canceled`). A plain retain would then revive a
    ///   dying object; `swift_tryRetain` fails instead, and the cancel goes no further up (there
    ///   is nothing further: a target that has a link of its own while pending is held by what
    ///   it links to, so only a promise with no link can be found deinitialising).
    /// - The link is read *before* the releasing store that publishes this future's completed
    ///   bit: once that bit is visible, the target's drain may skip our entry without the lock
    ///   (`_isCompleted`) and free the target.
    ///
    /// This replaces a `weak` reference, which cost the target a side table: an allocation,
    /// and slow-path reference counting for the rest of its life (about 15% of the seed
    /// workload's time).
    @usableFromInline @exclusivity(unchecked)
    final var _upstream: Unmanaged<AnyObject>?

    // Inlinable so that it is specialised with the subclass and convenience initialisers:
    // unspecialised, it looks up the generic metadata of every stored field on each call.
    @inlinable
    init(_result result: Result<Value, any Error>?) {
        _state = Atomic(result == nil ? 0 : _StateBits.completed)
        switch result {
        case .success(let value)?:
            _error = nil
            super.init(_storing: value)
        case .failure(let error)?:
            _error = error
            super.init(_storing: nil)
        case nil:
            _error = nil
            super.init(_storing: nil)
        }
    }

    /// Creates a pending future whose upstream link is `upstream` (see `_DerivedFuture`).
    @inlinable
    init(_pendingWithUpstream upstream: AnyObject) {
        _state = Atomic(0)
        _error = nil
        _upstream = Unmanaged.passUnretained(upstream)
        super.init(_storing: nil)
    }

    /// Creates a future that is already completed with `result`.
    ///
    /// - Parameter result: The result provided by this future.
    @inlinable
    public convenience init(result: Result<Value, any Error>) {
        self.init(_result: result)
    }

    /// Creates a future that is already completed with a success value.
    ///
    /// - Parameter value: The value provided by this future.
    @inlinable
    public convenience init(value: Value) {
        self.init(_result: .success(value))
    }

    /// Creates a future that is already completed with an error.
    ///
    /// - Parameter error: The error provided by this future.
    @inlinable
    public convenience init(error: any Error) {
        self.init(_result: .failure(error))
    }

    deinit {
        // Nobody else can reach this future any more; complete whoever still waits on it.
        // Fast path without generic metadata: a completed future has nothing left to do.
        // (Every write to this future's fields precedes the releasing store of `_state` that
        // the acquiring load sees, so the fields' destruction below is ordered after them.)
        if _state.load(ordering: .acquiring) & _StateBits.completed != 0 { return }
        _completeOrphans()
    }

    /// Completes the callbacks of a future deallocated while pending.
    @usableFromInline
    final func _completeOrphans() {
        _lock.lock()
        let orphans = _callbacks.takeBatch()
        _lock.unlock()
        guard let (first, second, third, rest) = orphans else { return }
        var queue = _DrainQueue()
        let canceled = Result<Value, any Error>.failure(CoFutureError.canceled)
        _run(consume first, consume second, consume third, consume rest, with: canceled, into: &queue)
        queue.drainAll()
    }

    // MARK: - State

    /// The result, or `nil` while the future is pending.
    @inlinable
    public final var result: Result<Value, any Error>? {
        _state.load(ordering: .acquiring) & _StateBits.completed != 0 ? _result : nil
    }

    /// Whether the future completed with ``CoFutureError/canceled``.
    @inlinable
    public final var isCanceled: Bool {
        guard case .failure(let error) = result else { return false }
        return error.isCoFutureCancellation
    }

    /// Cancels this future and the chain it was derived from.
    ///
    /// If the future is pending, it completes with ``CoFutureError/canceled``: its
    /// ``whenCanceled(_:)`` handlers and other callbacks run, then the future it was derived from
    /// (its `map`/`flatMap` source, the inner future a `flatMap` waits for, or the future a
    /// ``CoPromise`` was told to forward) is cancelled in the same way, up the whole chain.
    /// Futures derived from those receive the cancellation error as their result.
    /// Cancelling a completed future does nothing.
    @inlinable
    public final func cancel() {
        var next = _cancelReturningUpstream()
        while let node = next {  // iterative: a long chain cannot overflow the stack
            next = node._cancelReturningUpstream()
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
        _add(.result(callback))
    }

    /// Adds a callback that receives the value if the future succeeds.
    ///
    /// - Parameter callback: The callback that is called with the success value.
    @inlinable
    public final func whenSuccess(_ callback: @escaping @Sendable (Value) -> Void) {
        _add(.success(callback))
    }

    /// Adds a callback that receives the error if the future fails (including cancellation).
    ///
    /// - Parameter callback: The callback that is called with the error.
    @inlinable
    public final func whenFailure(_ callback: @escaping @Sendable (any Error) -> Void) {
        _add(.failure(callback))
    }

    /// Adds a callback that runs if the future is cancelled (completes with ``CoFutureError/canceled``).
    ///
    /// - Parameter callback: The callback that is called on cancellation.
    @inlinable
    public final func whenCanceled(_ callback: @escaping @Sendable () -> Void) {
        _add(.canceled(callback))
    }

    // MARK: - Internals shared by the transforms, the promise and the async bridge

    /// The result if the future is complete and all earlier callbacks have run; `nil` otherwise.
    /// Work that would be a callback may then run at once without breaking registration order.
    @inlinable
    final func _settledResult() -> Result<Value, any Error>? {
        _state.load(ordering: .acquiring) == _StateBits.completed ? _result : nil
    }

    /// Whether a result is set (even if callbacks are still being drained).
    @inlinable
    final var _isCompleted: Bool {
        _state.load(ordering: .acquiring) & _StateBits.completed != 0
    }

    /// Appends `callback` to the list, or, if the future is settled, hands it to `settled` with
    /// the result (after the lock is released).
    ///
    /// `callback` is `consuming` and the lock is taken with `lock()`/`unlock()` rather than
    /// `withLock`, so the callback is *moved* into the list: a closure would only borrow it, and
    /// the list would then take a copy (a retain now and a release when the caller's copy dies,
    /// for every registration: 5% of the seed workload's instructions and time). Nothing between
    /// `lock()` and `unlock()` can throw or exit early, and no user code runs in between.
    @inlinable @inline(__always)
    final func _append(
        _ callback: consuming _Callback<Value>,
        orIfSettled settled: (consuming _Callback<Value>, Result<Value, any Error>) -> Void
    ) {
        _lock.lock()
        guard _state.load(ordering: .relaxed) == _StateBits.completed else {
            _callbacks.append(callback)
            _lock.unlock()
            return
        }
        let result = _result.unsafelyUnwrapped  // completed: set, and never written again
        _lock.unlock()
        settled(callback, result)
    }

    /// Registers `callback`, or runs it at once (queueing any follow-up work on `queue`).
    @inlinable
    final func _add(_ callback: consuming _Callback<Value>, into queue: inout _DrainQueue) {
        _append(callback) { callback, result in
            callback.run(result, into: &queue)
        }
    }

    /// Registers `callback`, or runs it at once and drains whatever that completes.
    @inlinable
    final func _add(_ callback: consuming _Callback<Value>) {
        _append(callback) { callback, result in
            // Only here is a drain queue needed: creating and destroying an empty one on every
            // registration costs about as much as the registration itself.
            var queue = _DrainQueue()
            queue.runningLast = true  // the only callback run here: nothing to reorder
            callback.run(result, into: &queue)
            queue.drainAll()
        }
    }

    /// Sets the result if none is set yet. On success the caller must drain this future
    /// (push it on a drain queue). Returns whether this call completed the future.
    @inlinable
    final func _completeDeferred(_ result: Result<Value, any Error>) -> Bool {
        _lock.withLock {
            guard _state.load(ordering: .relaxed) & _StateBits.completed == 0 else { return false }
            _result = result
            _upstream = nil
            _state.store(_StateBits.completed | _StateBits.draining, ordering: .releasing)  // last
            return true
        }
    }

    /// Completes the future and runs every callback that follows from it, in bounded stack depth.
    @inlinable
    final func _complete(_ result: Result<Value, any Error>) {
        var queue = _DrainQueue()
        queue.runningLast = true  // nothing else is queued
        _completeAndDrain(result, into: &queue)
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
    /// `_DrainQueue.maximumDepth` levels, so that a chain of any length still runs in bounded
    /// stack depth. Otherwise it is queued. Draining at once saves, per future, the lock round
    /// trip that takes the first batch of callbacks (taken here in the critical section that
    /// sets the result) and the retain and release of pushing and popping a drain step.
    ///
    /// One order does differ from queueing everything: a callback registered on the source
    /// *while* its callbacks run (so queued behind them on the source) now runs after the
    /// callbacks of a future completed by the batch's last callback, where it used to run
    /// before them. The order of each future's own callbacks is the same either way.
    @inlinable
    final func _completeAndDrain(_ result: Result<Value, any Error>, into queue: inout _DrainQueue) {
        guard queue.runningLast, queue.depth < _DrainQueue.maximumDepth else {
            if _completeDeferred(result) { queue.push(_drainStep) }
            return
        }
        _lock.lock()
        guard _state.load(ordering: .relaxed) & _StateBits.completed == 0 else {
            _lock.unlock()
            return
        }
        _result = result
        _upstream = nil
        guard let (first, second, third, rest) = _callbacks.takeBatch() else {
            _state.store(_StateBits.completed, ordering: .releasing)  // last; nothing to drain
            _lock.unlock()
            return
        }
        _state.store(_StateBits.completed | _StateBits.draining, ordering: .releasing)  // last
        _lock.unlock()
        queue.depth += 1
        defer { queue.depth -= 1 }
        _run(consume first, consume second, consume third, consume rest, with: result, into: &queue)
        _drain(into: &queue)  // callbacks registered meanwhile; clears the draining bit
    }

    /// Runs one batch of callbacks in order, telling each whether it is the batch's last
    /// (`_DrainQueue.runningLast`, see `_completeAndDrain`).
    @inlinable @inline(__always)
    final func _run(
        _ first: consuming _Callback<Value>,
        _ second: consuming _Callback<Value>?,
        _ third: consuming _Callback<Value>?,
        _ rest: consuming [_Callback<Value>]?,
        with result: Result<Value, any Error>,
        into queue: inout _DrainQueue
    ) {
        // `consume` moves each callback out of its optional: binding it with `guard let x`
        // alone would copy it (a retain and a release).
        queue.runningLast = second == nil
        first.run(result, into: &queue)
        guard let second = consume second else { return }
        queue.runningLast = third == nil
        second.run(result, into: &queue)
        guard let third = consume third else { return }
        queue.runningLast = rest == nil
        third.run(result, into: &queue)
        guard let rest = consume rest else { return }
        for index in rest.indices {
            queue.runningLast = index == rest.index(before: rest.endIndex)
            rest[index].run(result, into: &queue)
        }
    }

    /// Replaces the upstream link with `upstream` (an inner future a `flatMap` now waits for,
    /// or the future a promise forwards) if the future is still pending; returns whether it is
    /// pending. The caller must then register this future's `.forward` entry on `upstream`
    /// (see `_upstream`).
    @inlinable
    final func _relinkUpstream(_ upstream: AnyObject) -> Bool {
        _lock.withLock {
            guard _state.load(ordering: .relaxed) & _StateBits.completed == 0 else { return false }
            _upstream = Unmanaged.passUnretained(upstream)
            return true
        }
    }
}

extension CoFuture: _CoFutureNode {
    /// This future as a drain-loop step (see `_Erased`).
    @inlinable
    final var _drainStep: _Erased<Void> {
        _Erased(self) { object, _, queue in
            _recover(object, as: CoFuture<Value>.self)._drain(into: &queue)
        }
    }

    @inlinable
    final func _drain(into queue: inout _DrainQueue) {
        // Each batch is taken slot by slot into locals under `lock()`/`unlock()` (nothing in
        // between can throw or exit early; no user code runs there). Swapping the whole
        // `_CallbackList` out instead makes the compiler destroy the emptied list through its
        // value witnesses (several calls per batch), and returning the batch from `withLock`
        // as an optional tuple goes through the runtime's tuple value witnesses.
        while true {
            _lock.lock()
            guard _state.load(ordering: .relaxed) & _StateBits.completed != 0,
                let (first, second, third, rest) = _callbacks.takeBatch()
            else {
                _state.store(_state.load(ordering: .relaxed) & ~_StateBits.draining, ordering: .releasing)
                _lock.unlock()
                return
            }
            let result = _result.unsafelyUnwrapped  // completed: set, and never written again
            _lock.unlock()
            _run(consume first, consume second, consume third, consume rest, with: result, into: &queue)
        }
    }

    @inlinable
    final func _cancelReturningUpstream() -> (any _CoFutureNode)? {
        let upstream: Unmanaged<AnyObject>?? = _lock.withLock {
            guard _state.load(ordering: .relaxed) & _StateBits.completed == 0 else { return .none }
            _result = .failure(CoFutureError.canceled)
            // Read before the completed bit is published (see `_upstream`).
            let upstream = _upstream.flatMap(_retainUpstream)
            _upstream = nil
            _state.store(_StateBits.completed | _StateBits.draining, ordering: .releasing)  // last
            return .some(upstream)
        }
        guard case .some(let retained) = upstream else { return nil }
        // Taken after the lock (nothing is released there) and cast here (a conformance lookup);
        // a link always points to a CoFuture.
        let next = retained.map { $0.takeRetainedValue() as! any _CoFutureNode }
        var queue = _DrainQueue()
        _drain(into: &queue)
        queue.drainAll()
        return next
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
        self.init(_result: nil)
        let task = Task(priority: priority) { [self] in
            guard !_isCompleted else { return }  // cancelled before it started: the cancel wins
            let result: Result<Value, any Error>
            do {
                result = .success(try await operation())
            } catch {
                result = .failure(error)
            }
            _complete(result)
        }
        _add(.canceled { task.cancel() })
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
        self.init(_result: nil)
        queue.async { [self] in
            guard !_isCompleted else { return }
            _complete(Result(catching: body))
        }
    }
}

/// The bits of `CoFuture._state`.
@usableFromInline
enum _StateBits {
    @inlinable static var completed: UInt8 { 1 }
    @inlinable static var draining: UInt8 { 2 }
}

extension Error {
    /// Whether this error is ``CoFutureError/canceled``.
    @inlinable
    var isCoFutureCancellation: Bool {
        (self as? CoFutureError) == .canceled
    }
}
