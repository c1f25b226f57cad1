#if canImport(Combine) || OpenCombine
#if canImport(Combine)
import Combine
#else
import OpenCombine
#endif
import Testing
import TaskKit
import TaskKitCombine

struct BridgeError: Error, Equatable {}

/// A subscriber that requests nothing until told to, and records what it receives.
final class ManualSubscriber<Input: Sendable>: Subscriber, @unchecked Sendable {
    // Test-only: touched from the test's task and from the completing thread in turn, never
    // concurrently (each test completes the future synchronously on its own thread).
    typealias Failure = any Error
    var subscription: (any Subscription)?
    var values: [Input] = []
    var completions: [String] = []

    func receive(subscription: any Subscription) { self.subscription = subscription }
    func receive(_ input: Input) -> Subscribers.Demand { values.append(input); return .none }
    func receive(completion: Subscribers.Completion<any Error>) {
        switch completion {
        case .finished: completions.append("finished")
        case .failure(let error): completions.append("failure: \(error)")
        }
    }
}

@Suite("CoFuture <-> Publisher")
struct CombineBridgeTests {
    @Test func publisherEmitsTheValueOnceThenFinishes() {
        let promise = CoPromise<Int>()
        var values: [Int] = []
        var finished = false
        let cancellable = promise.publisher().sink(
            receiveCompletion: { if case .finished = $0 { finished = true } },
            receiveValue: { values.append($0) }
        )
        promise.success(3)
        promise.success(4)
        #expect(values == [3])
        #expect(finished)
        _ = cancellable
    }

    @Test func publisherHonoursDemand() {
        let future = CoFuture(value: 1)
        let subscriber = ManualSubscriber<Int>()
        future.publisher().subscribe(subscriber)
        #expect(subscriber.values.isEmpty)  // no demand yet
        subscriber.subscription?.request(.none)
        #expect(subscriber.values.isEmpty)
        subscriber.subscription?.request(.max(1))
        #expect(subscriber.values == [1])
        #expect(subscriber.completions == ["finished"])
        subscriber.subscription?.request(.max(1))  // no second delivery
        #expect(subscriber.values == [1])
    }

    @Test func publisherFailsWithTheFuturesError() {
        let subscriber = ManualSubscriber<Int>()
        CoFuture<Int>(error: BridgeError()).publisher().subscribe(subscriber)
        subscriber.subscription?.request(.unlimited)
        #expect(subscriber.values.isEmpty)
        #expect(subscriber.completions.count == 1)
        #expect(subscriber.completions.first?.hasPrefix("failure") == true)
    }

    @Test func cancellingTheSubscriptionBeforeCompletionCancelsTheFuture() {
        let promise = CoPromise<Int>()
        let cancellable = promise.publisher().sink(receiveCompletion: { _ in }, receiveValue: { _ in })
        cancellable.cancel()
        #expect(promise.isCancelled)

        let completed = CoFuture(value: 1)
        let afterwards = completed.publisher().sink(receiveCompletion: { _ in }, receiveValue: { _ in })
        afterwards.cancel()
        #expect(!completed.isCancelled)
    }

    @Test func subscribeCoFutureTakesTheFirstValueAndCancelsTheSubscription() async throws {
        let subject = PassthroughSubject<Int, Never>()
        var cancelled = false
        let future = subject.handleEvents(receiveCancel: { cancelled = true }).subscribeCoFuture()
        subject.send(7)
        subject.send(8)
        #expect(try await future.value == 7)
        #expect(cancelled)
    }

    @Test func subscribeCoFutureReportsFailureAndEmptyCompletion() async {
        let failing = PassthroughSubject<Int, BridgeError>()
        let failed = failing.subscribeCoFuture()
        failing.send(completion: .failure(BridgeError()))
        await #expect(throws: BridgeError()) { try await failed.value }

        let empty = Empty<Int, Never>().subscribeCoFuture()
        await #expect(throws: CoFuturePublisherError.finishedWithoutValue) { try await empty.value }
    }

    @Test func cancellingTheFutureCancelsTheSubscription() {
        let subject = PassthroughSubject<Int, Never>()
        var cancelled = false
        let future = subject.handleEvents(receiveCancel: { cancelled = true }).subscribeCoFuture()
        future.cancel()
        #expect(cancelled)
        #expect(future.isCancelled)
    }

    @Test func coFutureIsACancellable() {
        let promise = CoPromise<Int>()
        let cancellable: any Cancellable = promise
        cancellable.cancel()
        #expect(promise.isCancelled)
    }
}
#endif
