/// A result delivered once and awaited once, in either order: TaskKit's one one-shot
/// continuation primitive.
///
/// The first ``finish(with:)`` counts: it resumes the installed continuation, or keeps the
/// result for ``install(_:)``, which then resumes at once. Later calls do nothing and return
/// `false`, so a callback called twice, or a callback racing a timer or a cancellation handler,
/// resumes the continuation exactly once. Used by `CoFuture.value`,
/// `awaitCallback` and MonoTask's callback blocks.
///
/// The lock is the future's inline lock (`FutureLock`), so a one-shot is one allocation.
final class OneShot<Value: Sendable, Failure: Error>: @unchecked Sendable {
    // @unchecked Sendable is sound: `state` is only accessed while `lock` is held.
    private let lock = FutureLock()
    private var state = State.idle

    private enum State {
        case idle
        case waiting(CheckedContinuation<Value, Failure>)
        /// Finished before the continuation was installed.
        case finished(Result<Value, Failure>)
        case done
    }

    init() {}

    /// Installs the continuation; resumes it at once (and returns `false`) if already finished.
    /// - Precondition: no continuation was installed before.
    @discardableResult
    func install(_ continuation: CheckedContinuation<Value, Failure>) -> Bool {
        let early: Result<Value, Failure>? = lock.withLock(self) {
            switch state {
            case .finished(let result):
                state = .done
                return result
            case .idle:
                state = .waiting(continuation)
                return nil
            case .waiting, .done:
                preconditionFailure("OneShot: awaited twice")
            }
        }
        guard let early else { return true }
        continuation.resume(with: early)
        return false
    }

    /// Resumes the continuation with `result` unless an earlier call did; returns whether this
    /// call counted.
    @discardableResult
    func finish(with result: Result<Value, Failure>) -> Bool {
        let (counted, continuation): (Bool, CheckedContinuation<Value, Failure>?) = lock.withLock(self) {
            switch state {
            case .idle:
                state = .finished(result)
                return (true, nil)
            case .waiting(let continuation):
                state = .done
                return (true, continuation)
            case .finished, .done:
                return (false, nil)
            }
        }
        continuation?.resume(with: result)
        return counted
    }
}

extension OneShot where Failure == Never {
    /// Suspends until the result is delivered (at once if it already was).
    func value() async -> Value {
        await withCheckedContinuation { install($0) }
    }
}

extension OneShot where Failure == any Error {
    /// Suspends until the result is delivered (at once if it already was); throws its failure.
    func value() async throws -> Value {
        try await withCheckedThrowingContinuation { install($0) }
    }
}
