import Dispatch
import Testing
@testable import TaskKit
import TaskKitTestSupport
import TaskKitTesting

/// `value(timeout:clock:)`, `mapResult`, `flatMapResult` and `init(promise:)`.
@Suite(.scaledTimeLimit(minutes: 1)) struct CoFutureResultAndTimeoutTests {
    // MARK: value(timeout:clock:)

    @Test func aTimedWaitEndsWithTimeoutAndLeavesTheFuturePending() async throws {
        let clock = ManualClock()
        let promise = CoPromise<Int>()
        let waiter = Task { try await promise.value(timeout: .seconds(2), clock: clock) }
        await clock.waitForSleepers(count: 1)
        clock.advance(by: .seconds(2))
        await #expect(throws: CoFutureError.timeout) { try await waiter.boundedValue() }
        #expect(promise.result == nil)
        #expect(!promise.isCancelled)
        promise.success(5)
        #expect(try await promise.value == 5)
    }

    @Test func aTimedWaitReturnsTheValueWhenItComesFirstAndStopsItsTimer() async throws {
        let clock = ManualClock()
        let promise = CoPromise<Int>()
        let waiter = Task { try await promise.value(timeout: .seconds(2), clock: clock) }
        await clock.waitForSleepers(count: 1)
        promise.success(3)
        #expect(try await waiter.boundedValue() == 3)
        #expect(clock.sleeperCount == 0)
        let failing = CoPromise<Int>()
        let failed = Task { try await failing.value(timeout: .seconds(2), clock: clock) }
        await clock.waitForSleepers(count: 1)
        failing.fail(TestError(code: 4))
        await #expect(throws: TestError(code: 4)) { try await failed.boundedValue() }
    }

    @Test func aCompletedFutureAnswersAtOnceAndAZeroTimeoutOtherwiseTimesOut() async throws {
        #expect(try await CoFuture(value: 1).value(timeout: .zero) == 1)
        await #expect(throws: CoFutureError.timeout) { try await CoPromise<Int>().value(timeout: .zero) }
    }

    @Test func cancellingTheWaiterThrowsCancellationAndLeavesTheFuture() async throws {
        let clock = ManualClock()
        let promise = CoPromise<Int>()
        let waiter = Task { try await promise.value(timeout: .seconds(2), clock: clock) }
        await clock.waitForSleepers(count: 1)
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.boundedValue() }
        #expect(promise.result == nil)
    }

    // MARK: mapResult / flatMapResult

    @Test func mapResultSeesSuccessFailureAndCancellation() async throws {
        let succeeded = CoFuture(value: 2).mapResult { result in result.map { "\($0 * 2)" } }
        #expect(try await succeeded.value == "4")
        let recovered = CoFuture<Int>(error: TestError(code: 1)).mapResult { result -> Result<Int, any Error> in
            if case .failure(let error as TestError) = result { return .success(error.code + 10) }
            return result
        }
        #expect(try await recovered.value == 11)
        let source = CoPromise<Int>()
        let seen = Log<String>()
        let derived = source.mapResult { result -> Result<String, any Error> in
            if case .failure(let error as CoFutureError) = result { seen.append("\(error)") }
            return .success("after cancel")
        }
        source.cancel()
        #expect(seen.elements == ["CoFutureError.cancelled"])
        #expect(try await derived.value == "after cancel")
    }

    @Test func cancellingAMapResultFutureCancelsItsSourceAndSkipsTheTransform() {
        let source = CoPromise<Int>()
        let calls = Counter()
        let derived = source.mapResult { result -> Result<Int, any Error> in
            calls.increment()
            return result
        }
        derived.cancel()
        #expect(source.isCancelled)
        #expect(derived.isCancelled)
        #expect(calls.value == 0)
    }

    @Test func flatMapResultWaitsForTheInnerFuture() async throws {
        let source = CoPromise<Int>()
        let inner = CoPromise<String>()
        let derived = source.flatMapResult { result -> CoFuture<String> in
            if case .failure = result { return CoFuture(value: "fallback") }
            return inner
        }
        source.success(1)
        #expect(derived.result == nil)
        inner.success("inner")
        #expect(try await derived.value == "inner")
        let fallback = CoFuture<Int>(error: TestError()).flatMapResult { _ in CoFuture(value: "fallback") }
        #expect(try await fallback.value == "fallback")
    }

    @Test func cancellingAFlatMapResultFutureCancelsTheInnerFuture() {
        let source = CoPromise<Int>()
        let inner = CoPromise<Int>()
        let derived = source.flatMapResult { _ in inner }
        source.success(1)
        derived.cancel()
        #expect(inner.isCancelled)
    }

    // MARK: init(promise:)

    /// A callback API of the kind `CoFuture(promise:)` wraps.
    static func load(_ value: Int, completion: @escaping @Sendable (Result<Int, any Error>) -> Void) {
        DispatchQueue.global().async {
            completion(.success(value))
            completion(.success(-1))
        }
    }

    @Test func aFutureFromACallbackTakingFunctionTakesTheFirstResult() async throws {
        let future = CoFuture<Int>(promise: { Self.load(7, completion: $0) })
        #expect(try await future.value == 7)
        let failed = CoFuture<Int> { complete in complete(.failure(TestError(code: 2))) }
        await #expect(throws: TestError(code: 2)) { try await failed.value }
    }

    @Test func aCallbackAfterCancelIsIgnored() {
        let stored = LockedState<(@Sendable (Result<Int, any Error>) -> Void)?>(nil)
        let future = CoFuture<Int>(promise: { callback in stored.withLock { $0 = callback } })
        #expect(future.result == nil)
        future.cancel()
        stored.withLock { $0 }?(.success(1))
        #expect(future.isCancelled)
    }
}
