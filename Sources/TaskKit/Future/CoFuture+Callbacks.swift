// The machinery behind CoFuture's callbacks: what a callback is, how a future's list of them is
// stored, and the drain queue that runs a whole chain in bounded stack depth.

/// A future as seen by cancellation, independent of its value type. (Cancellation is not a hot
/// path, so dispatching through this existential is fine.)
@usableFromInline
protocol _CoFutureNode: AnyObject, Sendable {
    /// Cancels this future if pending; returns the future it was derived from, to cancel next.
    func _cancelReturningUpstream() -> (any _CoFutureNode)?
}

/// A type-erased step of the drain loop: an object and a function to apply to it.
///
/// Why a function beside an `AnyObject` rather than a protocol existential: a protocol witness of
/// a generic class always runs the *unspecialised* generic code of TaskKit, which looks up type
/// metadata at run time on every call (measured: most of the cost of a chain step). The
/// functions stored here are created in `@inlinable` code, so they are specialised in the
/// client for the concrete value type, and being non-capturing they allocate nothing.
@usableFromInline
struct _Erased<Argument>: Sendable {
    @usableFromInline let object: AnyObject & Sendable
    @usableFromInline let function: @Sendable (AnyObject, Argument, inout _DrainQueue) -> Void

    @inlinable
    init(_ object: AnyObject & Sendable, _ function: @escaping @Sendable (AnyObject, Argument, inout _DrainQueue) -> Void) {
        self.object = object
        self.function = function
    }

    @inlinable
    func callAsFunction(_ argument: Argument, into queue: inout _DrainQueue) {
        function(object, argument, &queue)
    }
}

/// Recovers the concrete type of an object stored in an ``_Erased`` step.
///
/// Safe because every `_Erased` value is built in exactly one place per step kind, from an
/// object of type `T` and a function that calls this with the same `T`; the object is never
/// replaced. Debug builds check the type (`unsafeDowncast` traps on a mismatch there).
@inlinable
func _recover<T: AnyObject>(_ object: AnyObject, as type: T.Type) -> T {
    unsafeDowncast(object, to: type)
}

/// One registered callback. An enum rather than a closure so that the common kinds need no
/// wrapping closure (and so no allocation): user callbacks are stored as given, and links to
/// derived futures are stored as the future itself.
@usableFromInline
enum _Callback<Value: Sendable>: Sendable {
    case result(@Sendable (Result<Value, any Error>) -> Void)
    case success(@Sendable (Value) -> Void)
    case failure(@Sendable (any Error) -> Void)
    case canceled(@Sendable () -> Void)
    /// Complete another future with the same result (flatMap's inner future, CoPromise forwarding).
    case forward(CoFuture<Value>)
    /// Feed a derived future (map, flatMap, recover…): the function receives the derived
    /// future and this future's result, and pushes onto the queue any future it completed.
    case transform(_Erased<Result<Value, any Error>>)

    @inlinable
    func run(_ result: Result<Value, any Error>, into queue: inout _DrainQueue) {
        switch self {
        case .result(let callback):
            callback(result)
        case .success(let callback):
            if case .success(let value) = result { callback(value) }
        case .failure(let callback):
            if case .failure(let error) = result { callback(error) }
        case .canceled(let callback):
            if case .failure(let error) = result, error.isCoFutureCancellation { callback() }
        case .forward(let future):
            future._completeAndDrain(result, into: &queue)
        case .transform(let step):
            step(result, into: &queue)
        }
    }
}

/// A future's callbacks in registration order. The first three are stored inline, so a future
/// with up to three observers (or derived futures) allocates nothing for them. (A third slot
/// made no difference in instructions against the array it replaces in the seed workload, and
/// saved that array's allocation: 7 to 6 allocations per iteration, 1–2% of the time.)
@usableFromInline
struct _CallbackList<Value: Sendable>: Sendable {
    @usableFromInline var first: _Callback<Value>?
    @usableFromInline var second: _Callback<Value>?
    @usableFromInline var third: _Callback<Value>?
    @usableFromInline var rest: [_Callback<Value>] = []

    @inlinable init() {}

    @inlinable mutating func append(_ callback: consuming _Callback<Value>) {
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

    /// Moves every callback out, leaving the list empty, or returns `nil` if it is empty. The
    /// slots come out as separate values (not an emptied `_CallbackList`, whose destruction the
    /// compiler routes through value witnesses).
    @inlinable @inline(__always)
    mutating func takeBatch() -> (
        first: _Callback<Value>, second: _Callback<Value>?, third: _Callback<Value>?, rest: [_Callback<Value>]?
    )? {
        guard let first = first.take() else { return nil }
        return (first, second.take(), third.take(), takeRest())
    }

    /// Moves the overflow array out, or returns `nil` if it is empty (without touching the
    /// shared empty-array storage, whose retain and release an empty local would cost).
    @inlinable
    mutating func takeRest() -> [_Callback<Value>]? {
        if rest.isEmpty { return nil }
        var taken: [_Callback<Value>] = []
        swap(&taken, &rest)
        return taken
    }

}

/// Completed futures whose callbacks still have to run. A callback that completes another
/// future runs that future's callbacks at once only when it is the last of its batch and the
/// recursion is shallow (`CoFuture._completeAndDrain`); otherwise it pushes the future here, and
/// one loop drains them all, so chains of any length complete in bounded stack depth.
@usableFromInline
struct _DrainQueue {
    @usableFromInline var first: _Erased<Void>?
    @usableFromInline var rest: [_Erased<Void>] = []
    /// How many futures are being completed and drained depth first on the stack right now
    /// (see `CoFuture._completeAndDrain`).
    @usableFromInline var depth = 0
    /// Whether the callback being run is the last of its batch (see
    /// `CoFuture._completeAndDrain`).
    @usableFromInline var runningLast = false

    /// How deep completions recurse before they are queued instead.
    @inlinable static var maximumDepth: Int { 16 }

    @inlinable init() {}

    @inlinable mutating func push(_ node: _Erased<Void>) {
        if first == nil {
            first = node
        } else {
            rest.append(node)
        }
    }

    @inlinable mutating func pop() -> _Erased<Void>? {
        if let node = first {
            first = nil
            return node
        }
        return rest.popLast()
    }

    @inlinable mutating func drainAll() {
        while let step = pop() {
            step((), into: &self)
        }
    }
}
