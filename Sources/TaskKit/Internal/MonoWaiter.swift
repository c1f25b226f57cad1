#if DEBUG
/// The continuation of an async caller of ``MonoTask`` or ``KeyedMonoTask``. Debug builds check
/// the exactly-once rule at run time.
@usableFromInline typealias MonoContinuation<Value> = CheckedContinuation<Result<Value, any Error>, Never>
#else
/// The continuation of an async caller of ``MonoTask`` or ``KeyedMonoTask``. Release builds rely
/// on the state machines' exactly-once rule and save the checked continuation's allocation.
@usableFromInline typealias MonoContinuation<Value> = UnsafeContinuation<Result<Value, any Error>, Never>
#endif

/// A caller waiting for a ``MonoTask`` run or a ``KeyedMonoTask`` load: the token their state
/// machines store and hand back exactly once.
@usableFromInline
enum MonoWaiter<Value: Sendable> {
    case async(MonoContinuation<Value>)
    case callback(@Sendable (Result<Value, any Error>) -> Void)
}

/// A stored waiter of ``MonoTaskStateMachine`` or ``KeyedMonoTaskStateMachine`` with the
/// identifier by which its caller's cancellation finds it. A labelled tuple: `Sendable` when
/// `Waiter` is, and constructible from inlinable code without an initialiser of its own.
@usableFromInline typealias IdentifiedWaiter<Waiter> = (id: UInt64, waiter: Waiter)

extension Array {
    /// Resumes the async waiters among these with `result`, in order, and returns the callbacks
    /// of the others, in order, for the owner to call (where its rules say).
    func resumingContinuations<Value>(
        with result: Result<Value, any Error>
    ) -> [@Sendable (Result<Value, any Error>) -> Void] where Element == MonoWaiter<Value> {
        resumingContinuations(with: result) { $0 }
    }

    /// ``resumingContinuations(with:)`` for elements that hold their waiter (`waiter` takes it
    /// out), such as ``IdentifiedWaiter``s.
    @inlinable
    func resumingContinuations<Value>(
        with result: Result<Value, any Error>, waiter: (Element) -> MonoWaiter<Value>
    ) -> [@Sendable (Result<Value, any Error>) -> Void] {
        var callbacks: [@Sendable (Result<Value, any Error>) -> Void] = []
        // An index loop: this may run unspecialised (in a load's task), where `for … in` reads
        // each element through `Collection`'s subscript coroutine, one allocation per waiter.
        for index in 0..<count {
            switch waiter(self[index]) {
            case .async(let continuation):
                continuation.resume(returning: result)
            case .callback(let callback):
                callbacks.append(callback)
            }
        }
        return callbacks
    }
}

/// Suspends the caller with a ``MonoContinuation`` handed to `body`.
@inlinable
nonisolated(nonsending)
func withMonoContinuation<Value>(
    _ body: (MonoContinuation<Value>) -> Void
) async -> Result<Value, any Error> {
    #if DEBUG
    await withCheckedContinuation(body)
    #else
    await withUnsafeContinuation(body)
    #endif
}

// Checked: continuations and `@Sendable` closures are `Sendable`.
extension MonoWaiter: Sendable {}
