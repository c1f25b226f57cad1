#if Tracing
import InMemoryTracing
import TaskKit
import TaskKitTestSupport
import TaskKitTracing
import Testing
import Tracing

/// The spans of MonoTask, KeyedMonoTask and TaskManager, recorded by an `InMemoryTracer` each
/// test owns (through `.distributedTracing(tracer:)`, or `withTracer(_:_:)` and
/// `.distributedTracing`: nothing is bootstrapped, so parallel tests never share a tracer).
@Suite(.scaledTimeLimit(minutes: 2)) struct TracingTests {
    private struct TracingTestError: Error {}

    private final class Doubler: ManagedTask {
        let value: Int
        init(value: Int) { self.value = value }
        func execute() async throws -> Int {
            if value < 0 { throw TracingTestError() }
            return value * 2
        }
    }

    @Test func aMonoTaskExecutionIsOneSpanUnderTheCallerThatStartedItWithItsMergedCallers() async throws {
        let tracer = W3CInMemoryTracer()
        let gate = TestGate()
        let task = MonoTask<Int>(resultExpireDuration: nil, tracing: .distributedTracing(tracer: tracer)) {
            await tracer.withSpan("inside the block") { _ in await gate.wait() }
            return .success(1)
        }
        let parentID = try await tracer.withSpan("request") { parent async throws in
            async let first = task.asyncExecute()
            await eventually("the run started") { task.isExecuting }
            async let second = task.asyncExecute()
            await eventually("the second caller merged") { task.counters.merges == 1 }
            gate.open()
            #expect(try await first.get() == 1)
            #expect(try await second.get() == 1)
            #expect(try await task.asyncExecute().get() == 1)  // a hit: no span
            return spanID(of: parent)
        }
        let executions = tracer.finishedSpans.filter { $0.operationName == "MonoTask.execute" }
        #expect(executions.count == 1)
        let execution = try #require(executions.first)
        #expect(execution.parentSpanID == parentID)
        #expect(execution.attributes.get("taskkit.monotask.callers") == .int64(2))
        #expect(execution.status?.code != .error)
        // The block runs with the execution's span current.
        let inside = tracer.finishedSpans.filter { $0.operationName == "inside the block" }
        #expect(inside.map(\.parentSpanID) == [execution.spanID])
    }

    @Test func aMonoTaskRetryIsAnEventAndAFinalFailureSetsErrorStatus() async throws {
        let tracer = W3CInMemoryTracer()
        let task = MonoTask<Int>(
            retry: .count(count: 2, intervalProxy: .fixed(.zero)), resultExpireDuration: .zero,
            tracing: .distributedTracing(tracer: tracer)
        ) { .failure(TracingTestError()) }
        await #expect(throws: TracingTestError.self) { try await task.executeThrows() }
        let execution = try #require(tracer.finishedSpans.first { $0.operationName == "MonoTask.execute" })
        #expect(execution.events.map(\.name) == ["retry", "retry"])
        #expect(execution.status?.code == .error)
        #expect(execution.errors.count == 1)
        #expect(execution.attributes.get("taskkit.monotask.callers") == .int64(1))
    }

    @Test func aKeyedLoadIsASpanUnderItsCallerAndAFailedOneHasErrorStatus() async throws {
        let tracer = W3CInMemoryTracer()
        let cache = KeyedMonoTask<Int, Int>(maximumEntries: 4, tracing: .distributedTracing(tracer: tracer)) { key in
            if key < 0 { throw TracingTestError() }
            return key
        }
        let parentID = try await tracer.withSpan("request") { parent async throws in
            await #expect(throws: TracingTestError.self) { try await cache.value(for: -1) }
            #expect(try await cache.value(for: 1) == 1)
            return spanID(of: parent)
        }
        let loads = tracer.finishedSpans.filter { $0.operationName == "KeyedMonoTask.load" }
        #expect(loads.count == 2)
        #expect(loads.allSatisfy { $0.parentSpanID == parentID })
        #expect(loads.filter { $0.status?.code == .error }.count == 1)
        #expect(loads.allSatisfy { $0.attributes.get("taskkit.monotask.callers") == .int64(1) })
    }

    @Test func aBatchIsOneSpanWithoutAParentWhateverItsCallers() async {
        let tracer = W3CInMemoryTracer()
        let cache = KeyedMonoTask<Int, Int>(
            maximumEntries: 10, maximumBatchSize: 10, tracing: .distributedTracing(tracer: tracer)
        ) { keys in Dictionary(uniqueKeysWithValues: keys.map { ($0, $0) }) }
        let results = await tracer.withSpan("request") { _ async in
            await cache.values(for: [1, 2, 3])
        }
        #expect(results.count == 3)
        let batches = tracer.finishedSpans.filter { $0.operationName == "KeyedMonoTask.batchLoad" }
        #expect(batches.count == 1)
        #expect(batches.first?.parentSpanID == nil)
        #expect(batches.first?.attributes.get("taskkit.keyed.batch_keys") == .int64(3))
        #expect(batches.first?.attributes.get("taskkit.monotask.callers") == .int64(3))
        #expect(tracer.finishedSpans.filter { $0.operationName == "KeyedMonoTask.load" }.isEmpty)
    }

    @Test func aManagedTaskRunsInASpanNamedAfterItsTypeUnderTheSpanWhereItWasAdded() async throws {
        let tracer = W3CInMemoryTracer()
        let manager = TaskManager(tracing: .distributedTracing(tracer: tracer))
        let parentID = try await tracer.withSpan("request") { parent async throws in
            #expect(try await manager.value(of: Doubler(value: 21)) == 42)
            await #expect(throws: TracingTestError.self) { try await manager.value(of: Doubler(value: -1)) }
            return spanID(of: parent)
        }
        let spans = tracer.finishedSpans.filter { $0.operationName == "Doubler" }
        #expect(spans.count == 2)
        #expect(spans.allSatisfy { $0.parentSpanID == parentID })
        #expect(spans.filter { $0.status?.code == .error }.count == 1)
        #expect(spans.allSatisfy { $0.traceID == spans.first?.traceID })
    }

    @Test func distributedTracingKeepsTheTracerActiveWhereTheComponentWasCreated() async throws {
        let tracer = W3CInMemoryTracer()
        let manager = withTracer(tracer) { TaskManager(tracing: .distributedTracing) }
        // Used outside the `withTracer` scope: the manager kept the tracer.
        #expect(try await manager.value(of: Doubler(value: 1)) == 2)
        #expect(tracer.finishedSpans.map(\.operationName) == ["Doubler"])
    }

    @Test func withoutATracerNothingIsTracedOrCaptured() async throws {
        // Nothing is bootstrapped in the test process: the active tracer is the no-op one.
        #expect(TaskTracing.distributedTracing.tracer == nil)
        #expect(TaskTracing.distributedTracing(tracer: NoOpTracer()).tracer == nil)
        #expect(TaskTracing.none.tracer == nil)
        let tracer = W3CInMemoryTracer()
        let manager = TaskManager()
        let task = MonoTask<Int>(resultExpireDuration: .zero) { .success(1) }
        try await tracer.withSpan("request") { _ async throws in
            #expect(try await manager.value(of: Doubler(value: 1)) == 2)
            #expect(try await task.executeThrows() == 1)
        }
        #expect(tracer.finishedSpans.map(\.operationName) == ["request"])
    }
}
#endif
