extension CoFuture {
    /// The success value, awaited without blocking a thread; throws the failure.
    ///
    /// Returns at once, without suspending, if the future is already complete.
    ///
    /// If the awaiting task is cancelled while it waits, this throws `CancellationError`
    /// promptly, and the future itself is **not** cancelled: other observers and awaiters still
    /// get its result. (To cancel the work when the awaiter goes away, call ``cancel()``
    /// yourself, e.g. from `withTaskCancellationHandler`.) A cancelled future throws
    /// ``CoFutureError/cancelled``.
    ///
    /// ```swift
    /// let user = try await fetchUser(id: 42).value
    /// ```
    public var value: Value {
        get async throws {
            if let result = result {
                return try result.get()
            }
            return try await awaitValue()
        }
    }

    /// The success value, awaited for at most `timeout` on `clock`; throws the failure, or
    /// ``CoFutureError/timeout`` when the deadline passes first.
    ///
    /// A timeout ends only this wait: the future stays pending, keeps its callbacks and can still
    /// be awaited or completed. Returns at once if the future is already complete (also when
    /// `timeout` is zero or negative, which otherwise times out at once). If the awaiting task is
    /// cancelled, this throws `CancellationError` and, as with ``value``, the future is not
    /// cancelled.
    ///
    /// ```swift
    /// let user = try await fetchUser(id: 42).value(timeout: .seconds(2))
    /// ```
    ///
    /// - Parameters:
    ///   - timeout: How long to wait.
    ///   - clock: The clock the deadline is measured on.
    /// - Throws: The future's error, ``CoFutureError/timeout``, or `CancellationError`.
    public func value(
        timeout: Duration,
        clock: some Clock<Duration> = ContinuousClock()
    ) async throws -> Value {
        if let result = result {
            return try result.get()
        }
        guard timeout > .zero else { throw CoFutureError.timeout }
        return try await withThrowingTaskGroup(of: Value.self) { group in
            group.addTask { try await self.value }
            group.addTask {
                try await clock.sleep(for: timeout)
                throw CoFutureError.timeout
            }
            defer { group.cancelAll() }
            guard let value = try await group.next() else { throw CancellationError() }
            return value
        }
    }

    private func awaitValue() async throws -> Value {
        let waiter = OneShot<Value, any Error>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                if waiter.install(continuation) {
                    add(.result { waiter.finish(with: $0) })
                }
            }
        } onCancel: {
            waiter.finish(with: .failure(CancellationError()))
        }
    }
}
