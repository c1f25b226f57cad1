#if canImport(Combine) || OpenCombine
#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif
import TaskKit

/// Errors from bridging a `Publisher` to a ``TaskKit/CoFuture``.
public enum CoFuturePublisherError: Error, Sendable, Hashable {
    /// The publisher finished without emitting any value.
    case finishedWithoutValue
}

extension Publisher where Output: Sendable {
    /// Subscribes to this publisher and returns a future of its first value.
    ///
    /// The future succeeds with the first value (the subscription is then cancelled), fails with
    /// the publisher's error, or fails with ``CoFuturePublisherError/finishedWithoutValue`` if the
    /// publisher finishes first. Cancelling the future cancels the subscription.
    ///
    /// ```swift
    /// let data = try await session.dataTaskPublisher(for: url).map(\.data).subscribeCoFuture().value
    /// ```
    public func subscribeCoFuture() -> CoFuture<Output> {
        let promise = CoPromise<Output>()
        let subscriber = FirstValueSubscriber<Output, Failure>(promise: promise)
        promise.whenCancelled { subscriber.cancelSubscription() }
        subscribe(subscriber)
        return promise
    }
}

/// Completes a promise with the first value of a publisher.
final class FirstValueSubscriber<Input: Sendable, Failure: Error>: Subscriber, @unchecked Sendable {
    // @unchecked Sendable: the only mutable state, the subscription, lives in `subscription`,
    // guarded by its lock; the promise is itself thread-safe.

    private let promise: CoPromise<Input>
    private let subscription = LockedState<(any Subscription)??>(nil)  // .some(nil) once done

    init(promise: CoPromise<Input>) {
        self.promise = promise
    }

    func receive(subscription: any Subscription) {
        let accepted = self.subscription.withLock { stored -> Bool in
            guard case .none = stored else { return false }
            stored = .some(subscription)
            return true
        }
        guard accepted, promise.result == nil else {
            subscription.cancel()
            return
        }
        subscription.request(.max(1))
    }

    func receive(_ input: Input) -> Subscribers.Demand {
        promise.success(input)
        cancelSubscription()
        return .none
    }

    func receive(completion: Subscribers.Completion<Failure>) {
        subscription.withLock { stored in stored = .some(nil) }
        switch completion {
        case .finished: promise.fail(CoFuturePublisherError.finishedWithoutValue)
        case .failure(let error): promise.fail(error)
        }
    }

    func cancelSubscription() {
        let active = subscription.withLock { stored -> (any Subscription)? in
            defer { stored = .some(nil) }
            return stored ?? nil
        }
        active?.cancel()
    }

    var combineIdentifier: CombineIdentifier { CombineIdentifier(self) }
}

#endif
