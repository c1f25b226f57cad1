/// The states and transitions of one ``CoFuture``: a value type with no locks, no threads and no
/// user code, tested as a value (`CoFutureStateMachineTests`).
///
/// A future keeps one machine under its lock. Each transition returns what the future must do
/// once the lock is released: run a batch of callbacks, run one callback at once, release a link,
/// cancel the next future up the chain. The result itself is not part of the machine: it is
/// written once by the future, in the same critical section as the transition to completed, and
/// read without the lock afterwards (see ``CoFuture``).
///
/// ```
///             complete / cancel            takeNextBatch / settleIfDrained
///   pending ──────────────────────▶ draining ─────────────────────────▶ settled
///      │      (batch taken at once, if requested and empty) ──────────────▲
///      └── abandon (deinit): batch handed out to run with `.cancelled`
/// ```
///
/// - **pending**: callbacks are stored; the upstream link (what ``CoFuture/cancel()`` cancels
///   next) may be replaced (`relink`).
/// - **draining**: the result is set and the callbacks registered so far are being run by one
///   thread, batch by batch; callbacks registered meanwhile are stored behind them, which keeps
///   registration order. The link is gone (handed out by the transition that completed).
/// - **settled**: every callback registered so far has run; a new one runs at once.
@usableFromInline
struct CoFutureStateMachine<Value: Sendable>: Sendable {
    @usableFromInline var phase: CoFuturePhase
    @usableFromInline var callbacks = CallbackList<Value>()
    @usableFromInline var upstream: UpstreamLink

    /// A machine for a future created pending, linked to `upstream`, or already completed.
    @inlinable
    init(completed: Bool, upstream: consuming UpstreamLink = .none) {
        phase = completed ? .settled : .pending
        self.upstream = upstream
    }

    // MARK: - Registering a callback

    @usableFromInline
    enum RegisterAction: Sendable {
        /// Stored: it runs when the future completes (or behind the callbacks being drained).
        case stored
        /// The future is settled: run this callback now, with the result.
        case runNow(FutureCallback<Value>)
    }

    @inlinable
    mutating func register(_ callback: consuming FutureCallback<Value>) -> RegisterAction {
        guard phase == .settled else {
            callbacks.append(callback)
            return .stored
        }
        return .runNow(callback)
    }

    // MARK: - Completing

    @usableFromInline
    enum CompleteAction: Sendable {
        /// Already completed: the result offered is dropped.
        case ignored
        /// This call completed the future; `released` is the old upstream link, to release after
        /// unlocking. If the caller asked to take the batch, the registered callbacks were moved
        /// into `batch` and, if there were none, the future settled; otherwise the caller drains
        /// with ``takeNextBatch(_:)``.
        case completed(released: UpstreamLink)
    }

    /// Completes a pending future. With `takingBatch`, the registered callbacks are moved into
    /// `batch` (which must be empty), and if there are none the future settles at once.
    @inlinable
    mutating func complete(takingBatch: Bool, into batch: inout CallbackBatch<Value>) -> CompleteAction {
        guard phase == .pending else { return .ignored }
        let released = upstream.take()
        guard takingBatch else {
            phase = .draining
            return .completed(released: released)
        }
        phase = callbacks.moveBatch(into: &batch) ? .draining : .settled
        return .completed(released: released)
    }

    /// Settles a draining future if no callback is left to run, and returns whether it did
    /// (the common end of a drain, checked without the batch ``takeNextBatch(_:)`` fills).
    @inlinable
    mutating func settleIfDrained() -> Bool {
        guard phase == .draining, callbacks.isEmpty else { return phase == .settled }
        phase = .settled
        return true
    }

    /// Moves the next batch of callbacks to run while draining into `batch` (which must be
    /// empty) and returns true; returns false, and the future settles, when none is left.
    @inlinable
    mutating func takeNextBatch(_ batch: inout CallbackBatch<Value>) -> Bool {
        guard phase == .draining else { return false }
        if callbacks.moveBatch(into: &batch) { return true }
        phase = .settled
        return false
    }

    // MARK: - Cancelling

    @usableFromInline
    enum CancelAction: Sendable {
        /// Already completed: cancelling does nothing.
        case ignored
        /// The future is now completed (the caller sets `.cancelled` and drains); `next` is the
        /// link to cancel next, up the chain.
        case cancelled(next: UpstreamLink)
    }

    @inlinable
    mutating func cancel() -> CancelAction {
        guard phase == .pending else { return .ignored }
        phase = .draining
        return .cancelled(next: upstream.take())
    }

    // MARK: - The upstream link

    /// Replaces the link while pending (a `flatMap` now waiting for its inner future, a promise
    /// told to forward another future). Returns the link to release after unlocking: the old one
    /// if the future is pending, otherwise `link` itself; and whether the future was pending.
    @inlinable
    mutating func relink(_ link: consuming UpstreamLink) -> (pending: Bool, released: UpstreamLink) {
        guard phase == .pending else { return (false, link) }
        swap(&upstream, &link)
        return (true, link)
    }

    // MARK: - Abandonment

    /// The future is being deallocated while pending (a ``CoPromise`` dropped by its producer):
    /// moves every callback into `batch`, to run with ``CoFutureError/cancelled``; returns
    /// whether there were any.
    @inlinable
    mutating func abandon(into batch: inout CallbackBatch<Value>) -> Bool {
        guard phase != .settled else { return false }
        phase = .settled
        return callbacks.moveBatch(into: &batch)
    }
}

/// The phase of a ``CoFutureStateMachine``, as the bits the future mirrors into its atomic state
/// word: *completed* (1) and *draining* (2). (Not nested in the generic machine: a nested type
/// would be generic too, and the future's unspecialised `deinit` would look up its metadata.)
@usableFromInline
enum CoFuturePhase: UInt8, Sendable {
    case pending = 0
    case settled = 1
    case draining = 3

    /// The bit set in both completed phases (`settled` and `draining`).
    @inlinable static var completedBit: UInt8 { 1 }
}

/// What ``CoFuture/cancel()`` cancels next: the future this one was derived from, the inner future
/// a `flatMap` waits for, or the future a promise forwards. See ``CoFuture`` for the ownership
/// rules: a link to a ``CoPromise`` is weak, any other link is strong.
@usableFromInline
enum UpstreamLink: Sendable {
    case none
    /// A future that is not a promise: something else will complete it and holds it until then,
    /// so holding it here too creates no lifetime of its own; it is released when this future
    /// completes or is cancelled. (Always a ``CancellableFuture``; stored as one word, and cast
    /// when a cancel follows it, to keep the machine small: see ``CallbackBatch``.)
    case strong(AnyObject & Sendable)
    /// A promise, referenced weakly so that a promise its producer dropped still deinitialises
    /// (and cancels what waits on it) while futures derived from it are held. The weak
    /// reference itself is the future's `weakUpstream`, read under its lock: a `weak` stored
    /// inside this enum would make the machine, and every action carrying a link,
    /// address-only, so that each copy and move went through runtime value witnesses.
    case weak

    /// Moves the link out, leaving `.none`.
    @inlinable
    mutating func take() -> UpstreamLink {
        var taken = UpstreamLink.none
        swap(&self, &taken)
        return taken
    }
}

/// A future as seen by cancellation, independent of its value type. (Cancellation is not a hot
/// path, so dispatching through this existential is fine.)
@usableFromInline
protocol CancellableFuture: AnyObject, Sendable {
    /// Cancels this future if pending; returns the future it was derived from, to cancel next.
    func cancelReturningUpstream() -> (any CancellableFuture)?
}

/// A future's callbacks in registration order. The first three are stored inline, so a future
/// with up to three observers (or derived futures) allocates nothing for them.
@usableFromInline
struct CallbackList<Value: Sendable>: Sendable {
    @usableFromInline var first: FutureCallback<Value>?
    @usableFromInline var second: FutureCallback<Value>?
    @usableFromInline var third: FutureCallback<Value>?
    @usableFromInline var rest: [FutureCallback<Value>] = []

    @inlinable init() {}

    @inlinable var isEmpty: Bool { first == nil }

    @inlinable mutating func append(_ callback: consuming FutureCallback<Value>) {
        if first == nil {
            first = callback
        } else if second == nil {
            second = callback
        } else if third == nil {
            third = callback
        } else {
            rest.append(callback)
        }
    }

    /// Moves every callback into `batch` (whose slots must be empty), leaving the list empty;
    /// returns false if the list was empty.
    @inlinable @inline(__always)
    mutating func moveBatch(into batch: inout CallbackBatch<Value>) -> Bool {
        guard let first = first.take() else { return false }
        batch.first = first
        batch.second = second.take()
        batch.third = third.take()
        if !rest.isEmpty {  // leaves the shared empty-array storage alone when there is no overflow
            var array: [FutureCallback<Value>] = []
            swap(&array, &rest)
            batch.rest = array
        }
        return true
    }
}

/// The callbacks taken out of a ``CallbackList`` in one go, in registration order: the slots a
/// future's drain moves callbacks into (under the lock) and out of (to run them, unlocked).
///
/// The future keeps it as a local variable and the machine fills it through `inout`, rather than
/// returning it: a value this large (four callback slots) returned, copied or destroyed as a
/// whole goes through runtime value witnesses, a cost per batch. Each slot is moved out
/// (`take()`) before its callback runs, so the emptied batch costs nothing to destroy.
@usableFromInline
struct CallbackBatch<Value: Sendable>: Sendable {
    @usableFromInline var first: FutureCallback<Value>?
    @usableFromInline var second: FutureCallback<Value>?
    @usableFromInline var third: FutureCallback<Value>?
    @usableFromInline var rest: [FutureCallback<Value>]?

    @inlinable init() {}
}
