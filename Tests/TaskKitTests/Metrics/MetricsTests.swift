import MetricsTestKit
import Testing
@testable import TaskKit
import TaskKitTestSupport
import TaskKitTesting

private func requests(_ label: String, _ outcome: String) -> Int64 {
    processTestMetrics.counterTotal(
        label: "taskkit_monotask_requests", dimensions: [("name", label), ("outcome", outcome)]
    )
}

private func total(_ metric: String, _ label: String) -> Int64 {
    processTestMetrics.counterTotal(label: metric, dimensions: [("name", label)])
}

private struct MetricsTestError: Error {}

@Suite struct MonoTaskMetricsTests {
    @Test func requestsCountAsExecutedMergedOrHitAndRunsAreTimed() async throws {
        _ = processTestMetrics  // bootstrapped before the component makes its metric objects
        let metrics = processTestMetrics
        let gate = TestGate()
        let task = MonoTask<Int>(
            resultExpireDuration: nil, clock: ContinuousClock(), metricsLabel: "mono-outcomes"
        ) {
            await gate.wait()
            return .success(7)
        }
        async let first = task.asyncExecute()
        await eventually { task.isExecuting }
        async let second = task.asyncExecute()
        await eventually { requests("mono-outcomes", "merged") == 1 }
        gate.open()
        #expect(try await first.get() == 7)
        #expect(try await second.get() == 7)
        #expect(try await task.asyncExecute().get() == 7)
        #expect(try await task.asyncExecute().get() == 7)

        #expect(requests("mono-outcomes", "loaded") == 1)
        #expect(requests("mono-outcomes", "merged") == 1)
        #expect(requests("mono-outcomes", "hit") == 2)
        #expect(total("taskkit_monotask_failures", "mono-outcomes") == 0)
        let timer = try metrics.expectTimer("taskkit_monotask_load_duration", [("name", "mono-outcomes")])
        #expect(timer.values.count == 1)
    }

    @Test func aFailedRunCountsOnceAfterItsRetriesAndCallbacksCount() async throws {
        _ = processTestMetrics  // bootstrapped before the component makes its metric objects
        let task = MonoTask<Int>(
            retry: .count(count: 2, intervalProxy: .fixed(.zero)),
            resultExpireDuration: .zero, clock: ContinuousClock(), metricsLabel: "mono-failures"
        ) { .failure(MetricsTestError()) }
        await #expect(throws: MetricsTestError.self) { try await task.asyncExecute().get() }
        let delivered = MonoCounter()
        task.execute { _ in delivered.increment() }
        await delivered.wait(untilAtLeast: 1)
        #expect(requests("mono-failures", "loaded") == 2)
        #expect(total("taskkit_monotask_failures", "mono-failures") == 2)
        let timer = try processTestMetrics.expectTimer(
            "taskkit_monotask_load_duration", [("name", "mono-failures")]
        )
        #expect(timer.values.count == 2)
    }

    @Test func withoutALabelNoMetricObjectIsMade() async throws {
        _ = processTestMetrics  // bootstrapped before the component makes its metric objects
        let task = MonoTask<Int>(resultExpireDuration: nil, clock: ContinuousClock()) { .success(1) }
        let keyed = KeyedMonoTask<Int, Int>(maximumEntries: 4) { $0 }
        let manager = TaskManager()
        #expect(task.metrics == nil)
        #expect(keyed.metrics == nil)
        #expect(manager.storage.metrics == nil)
        _ = await task.asyncExecute()
        _ = try await keyed.value(for: 1)
        _ = try await manager.value { 1 }
        // Other tests running meanwhile create labelled objects only: none of them is unlabelled.
        #expect(processTestMetrics.counters.allSatisfy { $0.dimensions.first?.0 == "name" })
    }
}

@Suite struct KeyedMonoTaskMetricsTests {
    @Test func requestsHitsAndEvictionsAreCountedPerCache() async throws {
        _ = processTestMetrics  // bootstrapped before the component makes its metric objects
        let gate = TestGate()
        let cache = KeyedMonoTask<Int, Int>(
            maximumEntries: 2, resultExpireDuration: .seconds(3_600), metricsLabel: "keyed-outcomes"
        ) { key in
            if key == 0 { await gate.wait() }
            if key < 0 { throw MetricsTestError() }
            return key * 10
        }
        async let first = cache.value(for: 0)
        await eventually { cache.count == 1 }
        async let second = cache.value(for: 0)
        await eventually { requests("keyed-outcomes", "merged") == 1 }
        gate.open()
        #expect(try await first == 0)
        #expect(try await second == 0)
        #expect(try await cache.value(for: 0) == 0)  // hit
        #expect(try await cache.value(for: 1) == 10)
        #expect(try await cache.value(for: 2) == 20)  // evicts key 1, unread (key 0 was read)
        let many = await cache.values(for: [0, 2])  // two hits
        #expect(many.count == 2)
        await #expect(throws: MetricsTestError.self) { try await cache.value(for: -1) }

        #expect(requests("keyed-outcomes", "loaded") == 4)
        #expect(requests("keyed-outcomes", "merged") == 1)
        #expect(requests("keyed-outcomes", "hit") == 3)
        #expect(total("taskkit_monotask_failures", "keyed-outcomes") == 1)
        #expect(total("taskkit_keyed_evictions", "keyed-outcomes") >= 1)
        #expect(total("taskkit_keyed_evictions", "keyed-outcomes") == Int64(cache.counters.evictions))
        let timer = try processTestMetrics.expectTimer(
            "taskkit_monotask_load_duration", [("name", "keyed-outcomes")]
        )
        #expect(timer.values.count == 4)
    }
}

@Suite struct RefreshAheadMetricsTests {
    @Test func refreshesAheadAreCountedInBothComponents() async throws {
        _ = processTestMetrics  // bootstrapped before the component makes its metric objects
        let clock = ManualClock()
        let cache = KeyedMonoTask<Int, Int>(
            maximumEntries: 100, resultExpireDuration: .seconds(10), refreshAhead: .age(.seconds(5)), clock: clock,
            metricsLabel: "keyed-refresh-ahead"
        ) { key in key }
        let task = MonoTask<Int>(
            resultExpireDuration: .seconds(10), refreshAhead: .age(.seconds(5)), clock: clock,
            metricsLabel: "mono-refresh-ahead"
        ) { .success(1) }
        _ = try await cache.value(for: 1)
        _ = try await task.executeThrows()
        clock.advance(by: .seconds(6))
        _ = try await cache.value(for: 1)
        _ = try await task.executeThrows()
        await eventually { cache.counters.loads == 2 && task.counters.loads == 2 }
        #expect(total("taskkit_monotask_refreshes_ahead", "keyed-refresh-ahead") == 1)
        #expect(total("taskkit_monotask_refreshes_ahead", "mono-refresh-ahead") == 1)
        #expect(requests("keyed-refresh-ahead", "hit") == 1 && requests("mono-refresh-ahead", "hit") == 1)
    }
}

@Suite struct KeyedMonoTaskBatchMetricsTests {
    @Test func batchesAndTheirKeysAreCounted() async throws {
        _ = processTestMetrics  // bootstrapped before the component makes its metric objects
        let cache = KeyedMonoTask<Int, Int>(
            maximumEntries: 100, resultExpireDuration: .seconds(3_600), maximumBatchSize: 4,
            metricsLabel: "keyed-batches"
        ) { keys in Dictionary(uniqueKeysWithValues: keys.map { ($0, $0 * 10) }) }
        let results = await cache.values(for: Array(0..<10))
        #expect(results.count == 10)
        #expect(total("taskkit_keyed_batches", "keyed-batches") == 3)
        let sizes = try processTestMetrics.expectRecorder("taskkit_keyed_batch_keys", [("name", "keyed-batches")])
        #expect(sizes.values.map { Int($0) }.sorted() == [2, 4, 4])
        #expect(requests("keyed-batches", "loaded") == 10)
        #expect(cache.counters.batches == 3 && cache.counters.batchedKeys == 10)
    }
}

@Suite struct TaskManagerMetricsTests {
    private func tasks(_ label: String, _ outcome: String) -> Int64 {
        processTestMetrics.counterTotal(
            label: "taskkit_taskmanager_tasks", dimensions: [("name", label), ("outcome", outcome)]
        )
    }

    private func meter(_ metric: String, _ label: String) -> Double? {
        (try? processTestMetrics.expectMeter(metric, [("name", label)]))?.lastValue
    }

    @Test func outcomesGaugesAndDurationsAreReported() async throws {
        _ = processTestMetrics  // bootstrapped before the component makes its metric objects
        let label = "manager-outcomes"
        let manager = TaskManager(maximumConcurrentTasks: 1, metricsLabel: label)
        let gate = TestGate()
        #expect(try await manager.value { 1 } == 1)
        await #expect(throws: MetricsTestError.self) { try await manager.value { () throws -> Int in throw MetricsTestError() } }

        // One task holds the only slot; a second waits in the queue.
        let blocking = manager.add(execute: { await gate.wait(); return 2 })
        let queued = manager.add(execute: { 3 })
        await eventually("one running, one queued") {
            meter("taskkit_taskmanager_running", label) == 1 && meter("taskkit_taskmanager_queued", label) == 1
        }
        queued.cancel()
        gate.open()
        await manager.waitTillAllTasksFinished()
        _ = blocking

        let timedOut = manager.add(timeout: .milliseconds(1), execute: {
            try await Task.sleep(for: .seconds(60))
            return 4
        })
        await manager.waitTillAllTasksFinished()
        _ = timedOut

        #expect(tasks(label, "succeeded") == 2)
        #expect(tasks(label, "failed") == 1)
        #expect(tasks(label, "cancelled") == 1)
        #expect(tasks(label, "timed_out") == 1)
        await eventually("the gauges return to zero") {
            meter("taskkit_taskmanager_running", label) == 0 && meter("taskkit_taskmanager_queued", label) == 0
        }
        let timer = try processTestMetrics.expectTimer("taskkit_taskmanager_task_duration", [("name", label)])
        #expect(timer.values.count >= 3)
    }

    @Test func aDiscardedTaskIsCounted() async throws {
        _ = processTestMetrics  // bootstrapped before the component makes its metric objects
        let label = "manager-discarded"
        let manager = TaskManager(interceptors: [DiscardingInterceptor()], metricsLabel: label)
        await #expect(throws: TaskError.self) { try await manager.value { 1 } }
        #expect(tasks(label, "discarded") == 1)
    }
}

private struct DiscardingInterceptor: Interceptor {
    func intercept<T: ManagedTask>(task: inout T, currentBatchCount: Int) -> InterceptCommand { .discard }
}
