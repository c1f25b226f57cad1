/// The writable side of a ``CoFuture``: a future that you complete.
///
/// ```swift
/// let promise = CoPromise<Int>()
/// promise.whenSuccess { print($0) }
/// promise.success(42)          // prints 42
/// promise.fail(SomeError())    // ignored: the first completion wins
/// ```
///
/// A promise that is released without being completed completes its observers (and the futures
/// derived from it) with ``CoFutureError/cancelled``, so nobody waits forever.
public final class CoPromise<Value: Sendable>: CoFuture<Value>, @unchecked Sendable {
    // Restates CoFuture's `@unchecked Sendable`: CoPromise's one stored property,
    // `weakUpstreamTarget`, is guarded by the lock like the rest (see CoFuture).

    /// The target of a `.weak` upstream link, when this promise forwards another promise
    /// (see `CoFuture.weakUpstream`); guarded by `lock`.
    @usableFromInline @exclusivity(unchecked)
    weak var weakUpstreamTarget: (AnyObject & Sendable)?

    @usableFromInline
    override var weakUpstream: (AnyObject & Sendable)? {
        get { weakUpstreamTarget }
        set { weakUpstreamTarget = newValue }
    }

    /// Creates a pending promise.
    @inlinable
    public init() {
        super.init(completedWith: nil)
    }

    /// Completes the promise with a success value. Ignored if already completed.
    ///
    /// - Parameter value: The value.
    @inlinable
    public func success(_ value: Value) {
        completeAndRunCallbacks(.success(value))
    }

    /// Completes the promise with an error. Ignored if already completed.
    ///
    /// - Parameter error: The error.
    @inlinable
    public func fail(_ error: any Error) {
        completeAndRunCallbacks(.failure(error))
    }

    /// Completes the promise with a result. Ignored if already completed.
    ///
    /// - Parameter result: The result.
    @inlinable
    public func complete(with result: Result<Value, any Error>) {
        completeAndRunCallbacks(result)
    }

    /// Completes the promise with the result of `future`, when it has one.
    ///
    /// Cancelling the promise while it waits cancels `future` (as for any derived future).
    /// Ignored if the promise is already completed.
    ///
    /// - Parameter future: The future whose result to forward.
    @inlinable
    public func complete(with future: CoFuture<Value>) {
        guard future !== self, relinkUpstream(to: future) else { return }
        future.add(.forward(self))
    }
}
