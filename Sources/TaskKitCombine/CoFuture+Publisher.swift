#if canImport(Combine) || OpenCombine
#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif
import TaskKit

extension CoFuture {
    /// Returns a publisher that emits this future's value once and then finishes, or fails with
    /// its error.
    ///
    /// The publisher honours demand: nothing is delivered until the subscriber requests at least
    /// one value. Cancelling the subscription before the future completes cancels the future
    /// (and so the chain it was derived from, see `CoFuture.cancel()`); cancelling after
    /// completion does nothing to the future.
    ///
    /// ```swift
    /// let cancellable = fetchUser(id: 42).publisher()
    ///     .map(\.name)
    ///     .sink(receiveCompletion: { _ in }, receiveValue: { print($0) })
    /// ```
    public func publisher() -> AnyPublisher<Value, any Error> {
        CoFuturePublisher(self).eraseToAnyPublisher()
    }
}

extension CoFuture: Cancellable {}

/// A publisher of one `CoFuture`'s result. Create one with `CoFuture.publisher()`.
public struct CoFuturePublisher<Value: Sendable>: Publisher {
    /// The future's value type.
    public typealias Output = Value
    /// Any error the future fails with.
    public typealias Failure = any Error

    /// The future whose result is published.
    public let future: CoFuture<Value>

    /// Creates a publisher of `future`'s result.
    public init(_ future: CoFuture<Value>) {
        self.future = future
    }

    /// Attaches `subscriber`; see ``TaskKit/CoFuture/publisher()`` for the semantics.
    public func receive<S: Subscriber>(subscriber: S) where S.Input == Value, S.Failure == any Error {
        subscriber.receive(subscription: CoFutureSubscription(future: future, subscriber: AnySubscriber(subscriber)))
    }
}

/// The subscription behind ``CoFuturePublisher``.
final class CoFutureSubscription<Value: Sendable>: Subscription, @unchecked Sendable {
    typealias Downstream = AnySubscriber<Value, any Error>

    // @unchecked Sendable: all mutable state is in `state`, guarded by its lock. The subscriber
    // is called from whichever thread completes the future, outside the lock, as Combine
    // publishers generally do; it is called at most once for the value and once for completion.

    private struct State {
        var subscriber: Downstream?
        var requested = false
    }

    private let future: CoFuture<Value>
    private let state: LockedState<State>

    init(future: CoFuture<Value>, subscriber: Downstream) {
        self.future = future
        self.state = LockedState(State(subscriber: subscriber))
    }

    func request(_ demand: Subscribers.Demand) {
        guard demand > .none else { return }
        let first = state.withLock { state -> Bool in
            guard state.subscriber != nil, !state.requested else { return false }
            state.requested = true
            return true
        }
        guard first else { return }
        future.whenComplete { [self] result in deliver(result) }
    }

    func cancel() {
        let wasActive = state.withLock { state -> Bool in
            defer { state.subscriber = nil }
            return state.subscriber != nil
        }
        if wasActive { future.cancel() }  // does nothing if the future already completed
    }

    private func deliver(_ result: Result<Value, any Error>) {
        guard let subscriber = state.withLock({ state -> Downstream? in
            defer { state.subscriber = nil }
            return state.subscriber
        }) else { return }
        switch result {
        case .success(let value):
            _ = subscriber.receive(value)
            subscriber.receive(completion: .finished)
        case .failure(let error):
            subscriber.receive(completion: .failure(error))
        }
    }

    var combineIdentifier: CombineIdentifier { CombineIdentifier(self) }
}

#endif
