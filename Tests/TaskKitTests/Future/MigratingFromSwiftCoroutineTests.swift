import Dispatch
import Testing
@testable import TaskKit
import TaskKitTestSupport
import TaskKitTesting

/// SwiftCoroutine's `CoFuture` examples in their TaskKit form, one test per row of "Migrating
/// from SwiftCoroutine" (TaskKit.docc/MigratingFromSwiftCoroutine.md).
@Suite(.scaledTimeLimit(minutes: 1)) struct MigratingFromSwiftCoroutineTests {
    /// A stand-in for `URLSessionDataTask`: started, cancellable, completing through a callback.
    final class FakeDataTask: Sendable {
        let cancelled = Counter()
        let completion: @Sendable (String?, (any Error)?) -> Void
        init(completion: @escaping @Sendable (String?, (any Error)?) -> Void) { self.completion = completion }
        func resume() { DispatchQueue.global().async { self.completion("data", nil) } }
        func cancel() { cancelled.increment() }
    }

    /// The README's `dataTaskFuture(for:)`: a promise completed by a callback, cancelling the
    /// data task when the future is cancelled.
    static func dataTaskFuture(start: Bool = true) -> (CoFuture<String>, FakeDataTask) {
        let promise = CoPromise<String>()
        let task = FakeDataTask { data, error in
            if let error {
                promise.fail(error)
            } else if let data {
                promise.success(data)
            } else {
                promise.fail(TestError(code: 500))
            }
        }
        if start { task.resume() }
        promise.whenCancelled { task.cancel() }
        return (promise, task)
    }

    @Test func promiseFromACallbackAPI() async throws {
        let (future, _) = Self.dataTaskFuture()
        #expect(try await future.value == "data")
    }

    @Test func readyFuturesAndResult() throws {
        #expect(try CoFuture(result: .success(1)).result?.get() == 1)
        #expect(try CoFuture(value: 2).result?.get() == 2)
        #expect(throws: TestError(code: 3)) { try CoFuture<Int>(error: TestError(code: 3)).result?.get() }
        #expect(CoPromise<Int>().result == nil)
    }

    @available(*, deprecated, message: "exercises SwiftCoroutine's canceled spellings")
    @Test func cancelIsCanceledAndWhenCanceled() async throws {
        let (future, task) = Self.dataTaskFuture(start: false)
        let chained = future.map { $0.count }
        chained.cancel()  // cancels the whole upstream chain
        #expect(future.isCanceled && chained.isCanceled)
        #expect(task.cancelled.value == 1)
        await #expect(throws: CoFutureError.canceled) { try await future.value }
        // The original's case name still matches in a pattern.
        let matched: Bool
        switch CoFutureError.cancelled {
        case .canceled: matched = true
        default: matched = false
        }
        #expect(matched)
    }

    @Test func whenCompleteSuccessFailure() async throws {
        let promise = CoPromise<Int>()
        let log = Log<String>()
        promise.whenComplete { log.append("complete \((try? $0.get()) ?? -1)") }
        promise.whenSuccess { log.append("success \($0)") }
        promise.whenFailure { _ in log.append("failure") }
        promise.success(7)
        #expect(log.elements == ["complete 7", "success 7"])
    }

    @Test func buildingChainsWithMapAndFlatMap() async throws {
        let requestFuture = CoFuture(value: "request")
        let result = try await requestFuture
            .flatMap { _ in Self.dataTaskFuture().0 }
            .flatMap { data in CoFuture(on: .global()) { data.uppercased() } }
            .map { $0 + "!" }
            .value
        #expect(result == "DATA!")
    }

    @Test func awaitInsideACoroutineBecomesAsyncValue() async throws {
        // `CoroutineDispatcher.main.execute { try future.await() }`: any Swift task.
        let data = try await Task { @MainActor in try await Self.dataTaskFuture().0.value }.value
        #expect(data == "data")
    }

    @Test func awaitWithATimeout() async throws {
        let clock = ManualClock()
        let promise = CoPromise<Int>()
        let waiter = Task { try await promise.value(timeout: .seconds(1), clock: clock) }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(1))
        await #expect(throws: CoFutureError.timeout) { try await waiter.boundedValue() }
        #expect(promise.result == nil)
    }

    @Test func mapResultAndFlatMapResult() async throws {
        let failed = CoFuture<Int>(error: TestError(code: 1))
        #expect(try await failed.mapResult { _ in .success(0) }.value == 0)
        #expect(try await failed.flatMapResult { _ in CoFuture(value: 9) }.value == 9)
    }

    @Test func futureFromAPromiseClosure() async throws {
        @Sendable func someAsyncFunc(callback: @escaping @Sendable (Result<Int, any Error>) -> Void) {
            DispatchQueue.global().async { callback(.success(11)) }
        }
        let future = CoFuture(promise: someAsyncFunc)
        #expect(try await future.value == 11)
    }

    @Test func futureOfACoroutineBecomesAFutureOfATask() async throws {
        let one = CoFuture(value: 1), two = CoFuture(value: 2)
        let sum = CoFuture { try await one.value + two.value }
        #expect(try await sum.value == 3)
    }

    @Test func hashable() {
        let future = CoFuture(value: 1)
        let set: Set<CoFuture<Int>> = [future, future, CoFuture(value: 1)]
        #expect(set.count == 2)
        #expect(future == future)
    }
}
