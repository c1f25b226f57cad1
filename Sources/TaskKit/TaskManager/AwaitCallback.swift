/// Runs `body`, handing it a callback, and suspends until the callback is called; returns the
/// value passed to it.
///
/// This is the seed's blocking `await { done in … }` rebuilt on Swift concurrency: no thread is
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
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        let once = ResumeOnce(continuation)
        body { value in once.resume(returning: value) }
    }
}

/// Runs `body`, handing it a callback that takes no argument, and suspends until it is called.
///
/// Only the first call of the callback counts. Never blocks a thread.
public func awaitCallback(
    _ body: (@escaping @Sendable () -> Void) -> Void
) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let once = ResumeOnce(continuation)
        body { once.resume(returning: ()) }
    }
}

/// Runs `body`, handing it a callback taking a `Result`, and suspends until it is called;
/// returns the success value or throws the failure.
///
/// Only the first call of the callback counts. Never blocks a thread.
public func awaitCallback<T: Sendable>(
    _ body: (@escaping @Sendable (Result<T, any Error>) -> Void) -> Void
) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let once = ResumeOnceThrowing(continuation)
        body { result in once.resume(with: result) }
    }
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
    return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let once = ResumeOnceThrowing(continuation)
        let timer = Task {
            do {
                try await clock.sleep(for: timeout)
            } catch {
                return  // the callback came first and cancelled the timer
            }
            once.resume(with: .failure(TaskError.timedOut))
        }
        body { result in
            timer.cancel()
            once.resume(with: result)
        }
    }
}

/// A continuation resumed by the first of any number of calls.
final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation: LockedState<CheckedContinuation<T, Never>?>

    init(_ continuation: CheckedContinuation<T, Never>) {
        self.continuation = LockedState(continuation)
    }

    func resume(returning value: T) {
        let taken = continuation.withLock { stored -> CheckedContinuation<T, Never>? in
            defer { stored = nil }
            return stored
        }
        taken?.resume(returning: value)
    }
}

/// A throwing continuation resumed by the first of any number of calls.
final class ResumeOnceThrowing<T: Sendable>: Sendable {
    private let continuation: LockedState<CheckedContinuation<T, any Error>?>

    init(_ continuation: CheckedContinuation<T, any Error>) {
        self.continuation = LockedState(continuation)
    }

    func resume(with result: Result<T, any Error>) {
        let taken = continuation.withLock { stored -> CheckedContinuation<T, any Error>? in
            defer { stored = nil }
            return stored
        }
        taken?.resume(with: result)
    }
}
