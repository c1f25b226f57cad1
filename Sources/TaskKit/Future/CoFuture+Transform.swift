extension CoFuture {
    /// Returns a future of this future's value transformed by `transform`.
    ///
    /// `transform` runs once, when this future succeeds (at once if it already has); if it
    /// throws, the new future fails with that error. A failure (including cancellation) passes
    /// through unchanged and `transform` does not run. If the new future is cancelled first,
    /// `transform` does not run either. Cancelling the new future cancels this one.
    ///
    /// - Parameter transform: Maps the success value.
    /// - Returns: The derived future.
    @inlinable
    public func map<NewValue: Sendable>(
        _ transform: @escaping @Sendable (Value) throws -> NewValue
    ) -> CoFuture<NewValue> {
        if let result = settledResult() {
            switch result {
            case .success(let value): return ReadyFuture<NewValue>(Result { try transform(value) })
            case .failure(let error): return ReadyFuture<NewValue>(.failure(error))
            }
        }
        let derived = MapFuture(source: self, transform: transform)
        add(.transform(ErasedStep(derived) { object, result, queue in
            recoverObject(object, as: MapFuture<Value, NewValue>.self).upstreamCompleted(result, into: &queue)
        }))
        return derived
    }

    /// Returns a future that waits for the future `transform` returns from this future's value.
    ///
    /// `transform` runs once, when this future succeeds; the new future then completes with the
    /// inner future's result. A failure passes through unchanged. Cancelling the new future
    /// cancels this future while it is pending, and the inner future once it exists. If
    /// `transform` returns the new future itself, which could never complete, the new future
    /// completes with ``CoFutureError/cancelled``.
    ///
    /// - Parameter transform: Starts the next asynchronous step from the success value.
    /// - Returns: The derived future.
    @inlinable
    public func flatMap<NewValue: Sendable>(
        _ transform: @escaping @Sendable (Value) throws -> CoFuture<NewValue>
    ) -> CoFuture<NewValue> {
        let derived = FlatMapFuture(source: self, transform: transform)
        add(.transform(ErasedStep(derived) { object, result, queue in
            recoverObject(object, as: FlatMapFuture<Value, NewValue>.self).upstreamCompleted(result, into: &queue)
        }))
        return derived
    }

    /// Returns a future whose error is transformed by `transform`.
    ///
    /// Success values pass through. Cancellation (``CoFutureError/cancelled``) passes through
    /// unchanged too, so that cancelling stays visible along the chain.
    ///
    /// - Parameter transform: Maps the error.
    /// - Returns: The derived future.
    public func mapError(_ transform: @escaping @Sendable (any Error) -> any Error) -> CoFuture<Value> {
        recovering(.mapError(transform))
    }

    /// Returns a future that replaces a failure with a value computed by `transform`.
    ///
    /// If `transform` throws, the new future fails with that error. Cancellation is not
    /// recovered: it passes through unchanged.
    ///
    /// - Parameter transform: Computes a value from the error.
    /// - Returns: The derived future.
    public func recover(_ transform: @escaping @Sendable (any Error) throws -> Value) -> CoFuture<Value> {
        recovering(.recover(transform))
    }

    /// Returns a future that replaces a failure with the result of the future `transform` returns.
    ///
    /// Cancellation is not recovered: it passes through unchanged. If `transform` returns the
    /// new future itself, the new future completes with ``CoFutureError/cancelled``.
    ///
    /// - Parameter transform: Starts an asynchronous fallback from the error.
    /// - Returns: The derived future.
    public func flatMapError(
        _ transform: @escaping @Sendable (any Error) throws -> CoFuture<Value>
    ) -> CoFuture<Value> {
        recovering(.flatMapError(transform))
    }

    /// Returns a future of this future's whole result transformed by `transform`.
    ///
    /// `transform` runs once, when this future completes, with its result: a success, a failure,
    /// or `.failure(CoFutureError.cancelled)` if this future was cancelled. The new future
    /// completes with what `transform` returns. If the new future is cancelled first, `transform`
    /// does not run. Cancelling the new future cancels this one.
    ///
    /// ```swift
    /// let status: CoFuture<String> = upload.mapResult { result in
    ///     .success(result.isSuccess ? "sent" : "queued for later")
    /// }
    /// ```
    ///
    /// - Parameter transform: Maps the result.
    /// - Returns: The derived future.
    public func mapResult<NewValue: Sendable>(
        _ transform: @escaping @Sendable (Result<Value, any Error>) -> Result<NewValue, any Error>
    ) -> CoFuture<NewValue> {
        let derived = ResultMapFuture(source: self, transform: .map(transform))
        add(.transform(ErasedStep(derived) { object, result, queue in
            recoverObject(object, as: ResultMapFuture<Value, NewValue>.self).upstreamCompleted(result, into: &queue)
        }))
        return derived
    }

    /// Returns a future that waits for the future `transform` returns from this future's whole
    /// result.
    ///
    /// `transform` runs once, when this future completes, with its result (a cancelled future
    /// passes `.failure(CoFutureError.cancelled)`); the new future then completes with the inner
    /// future's result. Cancelling the new future cancels this future while it is pending, and
    /// the inner future once it exists. If `transform` returns the new future itself, the new
    /// future completes with ``CoFutureError/cancelled``.
    ///
    /// - Parameter transform: Starts the next asynchronous step from the result.
    /// - Returns: The derived future.
    public func flatMapResult<NewValue: Sendable>(
        _ transform: @escaping @Sendable (Result<Value, any Error>) -> CoFuture<NewValue>
    ) -> CoFuture<NewValue> {
        let derived = ResultMapFuture(source: self, transform: .flatMap(transform))
        add(.transform(ErasedStep(derived) { object, result, queue in
            recoverObject(object, as: ResultMapFuture<Value, NewValue>.self).upstreamCompleted(result, into: &queue)
        }))
        return derived
    }

    private func recovering(_ transform: RecoverFuture<Value>.Transform) -> CoFuture<Value> {
        let derived = RecoverFuture(source: self, transform: transform)
        add(.transform(ErasedStep(derived) { object, result, queue in
            recoverObject(object, as: RecoverFuture<Value>.self).upstreamCompleted(result, into: &queue)
        }))
        return derived
    }
}

// The derived futures below restate CoFuture's `@unchecked Sendable`: their own stored
// properties are immutable `let`s of Sendable types; the inherited mutable state is guarded by
// the base class's lock as documented on CoFuture.

/// A future that keeps its success value in a field typed by a generic parameter of its own
/// class, always instantiated as `TypedFuture<Value, Value?>`: the unspecialised `deinit` then
/// destroys the field with metadata read from the object's class metadata, where a `Value?`
/// field declared in `CoFuture<Value>` costs a run-time metadata lookup per future. Every
/// future TaskKit creates internally is one (derived futures, ready results of `map` on a
/// settled source); `CoFuture` reads and writes the field through `typedSelf`.
@usableFromInline
class TypedFuture<Value: Sendable, Stored>: CoFuture<Value>, @unchecked Sendable {
    // Restates CoFuture's `@unchecked Sendable`: `stored` follows the rules of CoFuture's result
    // fields (written under the lock before the completed bit is published, never after).

    /// The success value (`Stored == Value?`), `nil` until the future succeeds.
    @usableFromInline @exclusivity(unchecked)
    final var stored: Stored

    /// A completed future. (`Stored == Value?` is what makes `CoFuture.typedSelf` sound.)
    @inlinable
    init(completedWith result: Result<Value, any Error>) where Stored == Value? {
        if case .success(let value) = result { stored = value } else { stored = nil }
        super.init(completedWith: result, typed: true)
    }

    /// A pending future with the upstream link `link`.
    @inlinable
    init(pendingWith link: consuming UpstreamLink) where Stored == Value? {
        stored = nil
        super.init(pendingWith: link)
    }
}

/// A future created complete by TaskKit (the result of `map` on a settled source).
@usableFromInline
final class ReadyFuture<Value: Sendable>: TypedFuture<Value, Value?>, @unchecked Sendable {
    @inlinable
    init(_ result: Result<Value, any Error>) {
        super.init(completedWith: result)
    }
}

/// A future derived from another one (`map`, `flatMap`, `mapError`, `recover`, `flatMapError`).
@usableFromInline
class DerivedFuture<Value: Sendable>: TypedFuture<Value, Value?>, @unchecked Sendable {
    /// The target of a `.weak` upstream link (see `CoFuture.weakUpstream`); guarded by `lock`.
    @usableFromInline @exclusivity(unchecked)
    final weak var weakUpstreamTarget: (AnyObject & Sendable)?

    @usableFromInline
    override final var weakUpstream: (AnyObject & Sendable)? {
        get { weakUpstreamTarget }
        set { weakUpstreamTarget = newValue }
    }

    /// Creates a pending future derived from `source`, linked to it for ``cancel()`` (see
    /// ``CoFuture``, *Ownership*). The caller must then register the new future's entry on `source`.
    @inlinable
    init<Upstream>(source: CoFuture<Upstream>) {
        let (link, weakTarget) = UpstreamLink.to(source)
        if let weakTarget { weakUpstreamTarget = weakTarget }
        super.init(pendingWith: link)
    }

    /// Waits for `inner` and completes with its result (the second half of `flatMap` and
    /// `flatMapError`).
    @inlinable
    final func follow(_ inner: CoFuture<Value>, into queue: inout DrainQueue) {
        guard inner !== self else {
            // A future told to wait for itself could never complete: it is cancelled instead,
            // so that nothing derived from it waits for ever (or holds it in a cycle).
            completeAndDrain(.failure(CoFutureError.cancelled), into: &queue)
            return
        }
        if relinkUpstream(to: inner) {
            inner.add(.forward(self), into: &queue)
        } else {
            // This future was cancelled while the transform ran: nobody wants the new work.
            inner.cancel()
        }
    }
}

/// The future returned by `map`: holds the transform itself, so no closure is allocated.
@usableFromInline
final class MapFuture<Upstream: Sendable, Value: Sendable>: DerivedFuture<Value>, @unchecked Sendable {
    @usableFromInline final let transform: @Sendable (Upstream) throws -> Value

    @inlinable
    init(source: CoFuture<Upstream>, transform: @escaping @Sendable (Upstream) throws -> Value) {
        self.transform = transform
        super.init(source: source)
    }

    @inlinable
    func upstreamCompleted(_ result: Result<Upstream, any Error>, into queue: inout DrainQueue) {
        let mapped: Result<Value, any Error>
        switch result {
        case .success(let value):
            guard !isCompletedBit else { return }  // cancelled: do not run user code for nobody
            mapped = Result { try transform(value) }
        case .failure(let error):
            mapped = .failure(error)
        }
        completeAndDrain(mapped, into: &queue)
    }
}

/// The future returned by `flatMap`.
@usableFromInline
final class FlatMapFuture<Upstream: Sendable, Value: Sendable>: DerivedFuture<Value>, @unchecked Sendable {
    @usableFromInline final let transform: @Sendable (Upstream) throws -> CoFuture<Value>

    @inlinable
    init(source: CoFuture<Upstream>, transform: @escaping @Sendable (Upstream) throws -> CoFuture<Value>) {
        self.transform = transform
        super.init(source: source)
    }

    @inlinable
    func upstreamCompleted(_ result: Result<Upstream, any Error>, into queue: inout DrainQueue) {
        switch result {
        case .success(let value):
            guard !isCompletedBit else { return }
            do {
                follow(try transform(value), into: &queue)
            } catch {
                completeAndDrain(.failure(error), into: &queue)
            }
        case .failure(let error):
            completeAndDrain(.failure(error), into: &queue)
        }
    }
}

/// The future returned by `mapError`, `recover` and `flatMapError`.
final class RecoverFuture<Value: Sendable>: DerivedFuture<Value>, @unchecked Sendable {
    enum Transform: Sendable {
        case mapError(@Sendable (any Error) -> any Error)
        case recover(@Sendable (any Error) throws -> Value)
        case flatMapError(@Sendable (any Error) throws -> CoFuture<Value>)
    }

    private let transform: Transform

    init(source: CoFuture<Value>, transform: Transform) {
        self.transform = transform
        super.init(source: source)
    }

    func upstreamCompleted(_ result: Result<Value, any Error>, into queue: inout DrainQueue) {
        guard case .failure(let error) = result, !error.isCoFutureCancellation else {
            completeAndDrain(result, into: &queue)
            return
        }
        guard !isCompletedBit else { return }
        let next: Result<Value, any Error>
        switch transform {
        case .mapError(let transform):
            next = .failure(transform(error))
        case .recover(let transform):
            next = Result { try transform(error) }
        case .flatMapError(let transform):
            do {
                follow(try transform(error), into: &queue)
                return
            } catch {
                next = .failure(error)
            }
        }
        completeAndDrain(next, into: &queue)
    }
}

/// The future returned by `mapResult` and `flatMapResult`: its transform sees every result.
final class ResultMapFuture<Upstream: Sendable, Value: Sendable>: DerivedFuture<Value>, @unchecked Sendable {
    enum Transform: Sendable {
        case map(@Sendable (Result<Upstream, any Error>) -> Result<Value, any Error>)
        case flatMap(@Sendable (Result<Upstream, any Error>) -> CoFuture<Value>)
    }

    private let transform: Transform

    init(source: CoFuture<Upstream>, transform: Transform) {
        self.transform = transform
        super.init(source: source)
    }

    func upstreamCompleted(_ result: Result<Upstream, any Error>, into queue: inout DrainQueue) {
        guard !isCompletedBit else { return }  // cancelled: do not run user code for nobody
        switch transform {
        case .map(let transform):
            completeAndDrain(transform(result), into: &queue)
        case .flatMap(let transform):
            follow(transform(result), into: &queue)
        }
    }
}
