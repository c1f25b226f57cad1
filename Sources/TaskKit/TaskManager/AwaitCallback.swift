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
