import Dispatch
import Testing
@testable import TaskKit
import TaskKitTestSupport

/// Thousands of concurrent callers on a real `MonoTask` across every entry point, with
/// `clearResult` in all strategies and caller cancellation mixed in. Asserts exactly-once
/// delivery to every caller and that task blocks never overlap.
@Suite struct MonoTaskStressTests {
    enum BlockKind: String, CaseIterable, Sendable {
        case async, callback
    }

    struct Setup: Sendable, CustomTestStringConvertible {
        var block: BlockKind
        var ttl: Duration
        var retry: RetryCount
        var testDescription: String { "\(block) block, ttl \(ttl), retry \(retry)" }
    }

    static let setups: [Setup] = [
        Setup(block: .async, ttl: .zero, retry: .never),
        Setup(block: .async, ttl: .microseconds(500), retry: 2),
        Setup(block: .callback, ttl: .zero, retry: 1),
        Setup(block: .callback, ttl: .microseconds(500), retry: .never),
    ]

    static func makeTask(
        _ setup: Setup, overlap: MonoOverlap, attempts: MonoCounter, callbackQueue: DispatchQueue
    ) -> MonoTask<Int> {
        switch setup.block {
        case .async:
            return MonoTask<Int>(
                retry: setup.retry, resultExpireDuration: setup.ttl, callbackQueue: callbackQueue,
                clock: ContinuousClock()
            ) {
                overlap.enter()
                let attempt = attempts.increment()
                // Ignores cancellation on purpose, so `.cancel` leaves a body still running.
                for _ in 0..<(attempt % 4) { await Task.yield() }
                overlap.leave()
                return attempt % 5 == 0 ? .failure(MonoTestError(attempt: attempt)) : .success(attempt)
            }
        case .callback:
            return MonoTask<Int>(
                retry: setup.retry, resultExpireDuration: setup.ttl, callbackQueue: callbackQueue,
                clock: ContinuousClock()
            ) { callback in
                overlap.enter()
                let attempt = attempts.increment()
                DispatchQueue.global().async {
                    overlap.leave()
                    callback(attempt % 5 == 0 ? .failure(MonoTestError(attempt: attempt)) : .success(attempt))
                    callback(.success(-1))  // ignored
                }
            }
        }
    }

    @Test(arguments: setups)
    func thousandsOfCallersGetExactlyOneResultAndBlocksNeverOverlap(_ setup: Setup) async {
        let operations = 3_000
        let overlap = MonoOverlap()
        let attempts = MonoCounter()
        let callbackQueue = DispatchQueue(label: "mono.stress.callbacks")
        let task = Self.makeTask(setup, overlap: overlap, attempts: attempts, callbackQueue: callbackQueue)
        let deliveries = LockedState<[Int]>(Array(repeating: 0, count: operations))
        let badResults = LockedState<[String]>([])
        let callbacksExpected = MonoCounter()
        let callbacksDelivered = MonoCounter()

        @Sendable func record(_ index: Int, _ result: Result<Int, any Error>) {
            deliveries.withLock { $0[index] += 1 }
            switch result {
            case .success(let value) where value > 0: break
            case .failure(is MonoTestError), .failure(is CancellationError),
                .failure(MonoTask<Int>.Errors.executionCancelledDueToClearResult):
                break
            default:
                badResults.withLock { $0.append("\(index): \(result)") }
            }
        }

        await withTaskGroup(of: Void.self) { group in
            for index in 0..<operations {
                // Spread the callers out so runs start, retry and finish between them (the
                // executor is FIFO: without this every caller would run before the first block).
                if index % 25 == 0 {
                    for _ in 0..<5 { await Task.yield() }
                }
                group.addTask {
                    for _ in 0..<(index % 4) { await Task.yield() }
                    switch index % 10 {
                    case 0, 1, 2:
                        record(index, await task.asyncExecute(forceUpdate: index % 30 == 0))
                    case 3, 4:
                        callbacksExpected.increment()
                        task.execute(forceUpdate: index % 20 == 3) { result in
                            record(index, result)
                            callbacksDelivered.increment()
                        }
                    case 5:
                        let caller = Task { await task.asyncExecute() }
                        if index % 20 == 5 {
                            caller.cancel()  // usually before it registers
                        } else {
                            for _ in 0..<(index % 3) { await Task.yield() }
                            caller.cancel()  // usually while it waits
                        }
                        record(index, await caller.value)
                    case 6:
                        do {
                            let value = try await task.executeThrows()
                            record(index, .success(value))
                        } catch {
                            record(index, .failure(error))
                        }
                    case 7:
                        task.justExecute(forceUpdate: index % 20 == 7)
                        deliveries.withLock { $0[index] += 1 }
                    case 8:
                        let strategy = MonoTask<Int>.OngoingExecutionStrategy.allCases[(index / 10) % 3]
                        task.clearResult(ongoingExecutionStrategy: strategy, restartWhenIdle: index % 20 == 8)
                        deliveries.withLock { $0[index] += 1 }
                    default:
                        _ = task.currentResult
                        _ = task.isExecuting
                        deliveries.withLock { $0[index] += 1 }
                    }
                }
            }
        }
        await callbacksDelivered.wait(untilAtLeast: callbacksExpected.value)
        await eventually { !task.isExecuting && overlap.active == 0 }
        // Flush the serial callback queue: a second delivery would have been queued by now.
        await withCheckedContinuation { continuation in callbackQueue.async { continuation.resume() } }

        let counts = deliveries.withLock { $0 }
        #expect(counts.allSatisfy { $0 == 1 }, "deliveries other than exactly once: \(counts.enumerated().filter { $0.element != 1 }.prefix(5))")
        #expect(badResults.withLock { $0 }.isEmpty)
        #expect(overlap.maximum == 1)
        #expect(callbacksDelivered.value == callbacksExpected.value)
        let counters = task.counters
        #expect(counters.loads >= 1)
        #expect(counters.loads + counters.retries >= attempts.value)
    }

    @Test func cancellingEveryCallerNeverLosesOrDuplicatesAResumption() async {
        let gate = TestGate()
        let task = MonoTask<Int>(resultExpireDuration: .seconds(60), clock: ContinuousClock()) {
            await gate.wait()
            return .success(1)
        }
        let outcomes = LockedState<(cancelled: Int, succeeded: Int)>((0, 0))
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<2_000 {
                group.addTask {
                    let caller = Task { await task.asyncExecute() }
                    if index % 2 == 0 {
                        for _ in 0..<(index % 3) { await Task.yield() }
                        caller.cancel()
                    }
                    if index == 1_000 { gate.open() }
                    switch await caller.value {
                    case .success: outcomes.withLock { $0.succeeded += 1 }
                    case .failure(is CancellationError): outcomes.withLock { $0.cancelled += 1 }
                    case .failure: Issue.record("unexpected failure")
                    }
                }
            }
        }
        let (cancelled, succeeded) = outcomes.withLock { $0 }
        #expect(cancelled + succeeded == 2_000)
        #expect(succeeded >= 1_000)  // callers that were never cancelled always get the value
        #expect(task.currentResult == 1)
    }
}
