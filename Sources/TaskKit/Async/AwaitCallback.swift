/// Runs `body`, handing it a callback, and suspends until the callback is called; returns the
/// value passed to it.
///
/// A callback-shaped wait on Swift concurrency: no thread is
/// blocked while waiting, so any number of nested awaits complete on any number of cores. Only
/// the first call of the callback counts; later calls are ignored. If the callback is never
/// called the caller stays suspended (cancelling the calling Swift task does not resume it,
/// because `body` owns the work).
///
/// ```swift
/// let five = await awaitCallback { (done: @escaping @Sendable (Int) -> Void) in
///     DispatchQueue.global().async { done(5) }
/// }
/// ```
public func awaitCallback<T: Sendable>(
    _ body: (@escaping @Sendable (T) -> Void) -> Void
) async -> T {
    let once = OneShot<T, Never>()
    body { value in once.finish(with: .success(value)) }
    return await once.value()
}

/// Runs `body`, handing it a callback that takes no argument, and suspends until it is called.
///
/// Only the first call of the callback counts. Never blocks a thread.
public func awaitCallback(
    _ body: (@escaping @Sendable () -> Void) -> Void
) async {
    let once = OneShot<Void, Never>()
    body { once.finish(with: .success(())) }
    await once.value()
}

/// Runs `body`, handing it a callback taking a `Result`, and suspends until it is called;
/// returns the success value or throws the failure.
///
/// Only the first call of the callback counts. Never blocks a thread.
public func awaitCallback<T: Sendable>(
    _ body: (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void
) async throws -> T {
    let once = OneShot<T, any Error>()
    body { result in once.finish(with: result) }
    return try await once.value()
}

/// `awaitCallback(_:)` with a deadline: suspends until the callback is called or
/// `timeout` passes on `clock`, whichever comes first.
///
/// When the deadline passes first, this throws ``TaskError/timedOut`` and a later call of the
/// callback is ignored; the work `body` started is not stopped (it is `body`'s own), so stop it
/// yourself if it must not finish. Cancelling the calling Swift task does not end the wait early.
///
/// ```swift
/// let five = try await awaitCallback(timeout: .seconds(1)) { (done: @escaping @Sendable (Int) -> Void) in
///     DispatchQueue.global().async { done(5) }
/// }
/// ```
///
/// - Parameters:
///   - timeout: How long to wait, measured on `clock`; greater than zero.
///   - clock: The clock the deadline is measured on.
///   - body: Starts the work and calls the callback it is given.
/// - Throws: ``TaskError/timedOut`` when the deadline passes first.
/// - Precondition: `timeout` is greater than zero.
public func awaitCallback<T: Sendable>(
    timeout: Duration,
    clock: some Clock<Duration> = ContinuousClock(),
    _ body: (@escaping @Sendable (T) -> Void) -> Void
) async throws -> T {
    try await awaitCallbackResult(timeout: timeout, clock: clock) { finish in
        body { value in finish(.success(value)) }
    }
}

/// `awaitCallback(_:)` with a deadline: suspends until the callback is called or
/// `timeout` passes on `clock`; throws ``TaskError/timedOut`` in the second case.
///
/// As for `awaitCallback(timeout:clock:_:)`: a late call of the callback
/// is ignored, `body`'s work is not stopped, and cancelling the caller does not end the wait.
///
/// - Parameters:
///   - timeout: How long to wait, measured on `clock`; greater than zero.
///   - clock: The clock the deadline is measured on.
///   - body: Starts the work and calls the callback it is given.
/// - Precondition: `timeout` is greater than zero.
public func awaitCallback(
    timeout: Duration,
    clock: some Clock<Duration> = ContinuousClock(),
    _ body: (@escaping @Sendable () -> Void) -> Void
) async throws {
    try await awaitCallbackResult(timeout: timeout, clock: clock) { finish in
        body { finish(.success(())) }
    }
}

/// `awaitCallback(_:)` with a deadline: suspends until the
/// callback is called or `timeout` passes on `clock`; returns the success value, throws the
/// failure, or throws ``TaskError/timedOut``.
///
/// As for `awaitCallback(timeout:clock:_:)`: a late call of the callback
/// is ignored, `body`'s work is not stopped, and cancelling the caller does not end the wait.
///
/// - Parameters:
///   - timeout: How long to wait, measured on `clock`; greater than zero.
///   - clock: The clock the deadline is measured on.
///   - body: Starts the work and calls the callback it is given with the outcome.
/// - Precondition: `timeout` is greater than zero.
public func awaitCallback<T: Sendable>(
    timeout: Duration,
    clock: some Clock<Duration> = ContinuousClock(),
    _ body: (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void
) async throws -> T {
    try await awaitCallbackResult(timeout: timeout, clock: clock, body)
}

/// The shared implementation of the timed `awaitCallback` forms: the first of the callback and a
/// timer task sleeping on `clock` resumes the continuation; the callback cancels the timer.
private func awaitCallbackResult<T: Sendable, C: Clock<Duration>>(
    timeout: Duration,
    clock: C,
    _ body: (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void
) async throws -> T {
    precondition(timeout > .zero, "awaitCallback(timeout:clock:_:): timeout must be > 0, got \(timeout)")
    let once = OneShot<T, any Error>()
    let timer = Task {
        do {
            try await clock.sleep(for: timeout)
        } catch {
            return  // the callback came first and cancelled the timer
        }
        once.finish(with: .failure(TaskError.timedOut))
    }
    body { result in
        timer.cancel()
        once.finish(with: result)
    }
    return try await once.value()
}
