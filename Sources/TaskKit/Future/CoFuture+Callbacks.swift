// What a registered callback is, and the drain queue that runs a whole chain of completions in
// bounded stack depth.

/// A type-erased step of the drain loop: an object and a function to apply to it.
///
/// Why a function beside an object rather than a protocol existential: a protocol witness of a
/// generic class always runs the *unspecialised* generic code of TaskKit, which looks up type
/// metadata at run time on every call. The functions stored here are created in `@inlinable`
/// code, so they are specialised in the client for the concrete value type, and being
/// non-capturing they allocate nothing.
@usableFromInline
struct ErasedStep<Argument>: Sendable {
    @usableFromInline let object: AnyObject & Sendable
    @usableFromInline let function: @Sendable (AnyObject, Argument, inout DrainQueue) -> Void

    @inlinable
    init(_ object: AnyObject & Sendable, _ function: @escaping @Sendable (AnyObject, Argument, inout DrainQueue) -> Void) {
        self.object = object
        self.function = function
    }

    @inlinable
    func callAsFunction(_ argument: Argument, into queue: inout DrainQueue) {
        function(object, argument, &queue)
    }
}

/// Recovers the concrete type of an object stored in an ``ErasedStep``.
///
/// Every step is built in exactly one place per kind, in one expression, from an object whose
/// static type is `T` and a function literal that recovers that same `T` (`CoFuture.drainStep`,
/// `map`, `flatMap`, `recovering`), so the object is always a `T`. `unsafeDowncast` checks that
/// in debug builds, where the tests run; in release builds it skips the class cast, which cost
/// ~12 instructions per step.
@inlinable
func recoverObject<T: AnyObject>(_ object: AnyObject, as type: T.Type) -> T {
    unsafeDowncast(object, to: T.self)
}

/// One registered callback. An enum rather than a closure so that the common kinds need no
/// wrapping closure (and so no allocation): user callbacks are stored as given, and links to
/// derived futures are stored as the future itself.
@usableFromInline
enum FutureCallback<Value: Sendable>: Sendable {
    case result(@Sendable (Result<Value, any Error>) -> Void)
    case success(@Sendable (Value) -> Void)
    case failure(@Sendable (any Error) -> Void)
    case cancelled(@Sendable () -> Void)
    /// Complete another future with the same result (flatMap's inner future, CoPromise forwarding).
    case forward(CoFuture<Value>)
    /// Feed a derived future (map, flatMap, recover…): the function receives the derived
    /// future and this future's result, and completes or queues what follows.
    case transform(ErasedStep<Result<Value, any Error>>)

    /// Runs the callback if it is the user's (it can then complete no other future, so needs no
    /// drain queue) and returns true; returns false, without running it, for `.forward` and
    /// `.transform`.
    @inlinable
    func runIfUserCallback(_ result: Result<Value, any Error>) -> Bool {
        switch self {
        case .result(let callback):
            callback(result)
        case .success(let callback):
            if case .success(let value) = result { callback(value) }
        case .failure(let callback):
            if case .failure(let error) = result { callback(error) }
        case .cancelled(let callback):
            if case .failure(let error) = result, error.isCoFutureCancellation { callback() }
        case .forward, .transform:
            return false
        }
        return true
    }

    @inlinable
    func run(_ result: Result<Value, any Error>, into queue: inout DrainQueue) {
        if runIfUserCallback(result) { return }
        switch self {
        case .forward(let future):
            future.completeAndDrain(result, into: &queue)
        case .transform(let step):
            step(result, into: &queue)
        case .result, .success, .failure, .cancelled:
            break  // ran above
        }
    }
}

/// Completed futures whose callbacks still have to run. A callback that completes another
/// future runs that future's callbacks at once only when it is the last of its batch and the
/// recursion is shallow (`CoFuture.completeAndDrain`); otherwise it pushes the future here, and
/// one loop drains them all, so chains of any length complete in bounded stack depth.
@usableFromInline
struct DrainQueue {
    @usableFromInline var first: ErasedStep<Void>?
    /// Steps beyond the first; `nil` until needed, so an empty queue never touches the shared
    /// empty-array storage.
    @usableFromInline var rest: [ErasedStep<Void>]?
    /// How many futures are being completed and drained depth first on the stack right now.
    @usableFromInline var depth = 0
    /// Whether the callback being run is the last of its batch.
    @usableFromInline var runningLast = false

    /// How deep completions recurse before they are queued instead.
    @inlinable static var maximumDepth: Int { 16 }

    @inlinable init() {}

    @inlinable mutating func push(_ step: ErasedStep<Void>) {
        if first == nil {
            first = step
        } else if rest == nil {
            rest = [step]
        } else {
            rest!.append(step)
        }
    }

    @inlinable mutating func pop() -> ErasedStep<Void>? {
        if let step = first.take() { return step }
        return rest?.popLast()
    }

    @inlinable mutating func drainAll() {
        while let step = pop() {
            step((), into: &self)
        }
    }
}
