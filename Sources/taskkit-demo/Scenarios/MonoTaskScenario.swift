#if Examples
import Foundation
import TaskKit
import TaskKitLoopbackServer

extension Scenario {
    /// MonoTask: 500 concurrent callers share one upstream request; clearResult strategies;
    /// a flaky upstream recovered by retries with backoff.
    static let monoTask = Scenario(name: "monotask", title: "MonoTask — single-flight profile fetch") { context, record in
        let server = context.server

        // 1. 500 concurrent callers ask for a slow profile: one upstream request.
        let profile = MonoTask<String>(resultExpireDuration: .seconds(60)) {
            do {
                let (data, _) = try await context.fetch("/profile?user=ada")
                return .success(String(decoding: data, as: UTF8.self))
            } catch {
                return .failure(error)
            }
        }
        let callers = 500
        let start = ContinuousClock.now
        let successes = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<callers {
                group.addTask { (try? await profile.executeThrows()) != nil }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        let elapsed = start.duration(to: .now)
        let upstreamAfterBurst = await server.hits(.profile)
        record.measure("500 concurrent callers", "\(elapsed.milliseconds) for all, upstream requests: \(upstreamAfterBurst)")
        record.expect("callers served", successes, equals: callers)
        record.expect("upstream requests for 500 concurrent callers", upstreamAfterBurst, equals: 1)

        // A second wave inside the TTL: all cache hits.
        for _ in 0..<callers { _ = await profile.asyncExecute() }
        let counters = profile.counters
        record.measure("counters", counters.description)
        record.expect("upstream requests after 500 more calls inside the TTL", await server.hits(.profile), equals: 1)
        record.expect("executions", counters.loads, equals: 1)
        record.expect("cache hits", counters.hits, atLeast: callers)

        // 2. clearResult strategies while a run is in flight.
        // .cancel: waiters fail at once with executionCancelledDueToClearResult.
        let cancelWaiter = Task { await profile.asyncExecute(forceUpdate: true) }
        await waitUntil { profile.isExecuting }
        profile.clearResult(ongoingExecutionStrategy: .cancel)
        let cancelled = await cancelWaiter.value
        let cancelledAsExpected: Bool
        if case .failure(MonoTask<String>.Errors.executionCancelledDueToClearResult) = cancelled {
            cancelledAsExpected = true
        } else {
            cancelledAsExpected = false
        }
        record.check(
            "clearResult(.cancel) fails the waiter", expected: "executionCancelledDueToClearResult",
            actual: cancelledAsExpected ? "executionCancelledDueToClearResult" : "\(cancelled)", passed: cancelledAsExpected
        )
        record.expect("cache empty after clearResult(.cancel)", profile.currentResult == nil, equals: true)

        // .restart: the running execution's result is discarded; a fresh one follows and serves all.
        // A separate MonoTask, so the body cancelled just above (which the first MonoTask lets
        // finish before starting again) cannot delay this run; counted as executions, because
        // the request cancelled above may still reach the server at any moment.
        let restartable = MonoTask<String>(resultExpireDuration: .seconds(60)) {
            do {
                let (data, _) = try await context.fetch("/profile?user=grace")
                return .success(String(decoding: data, as: UTF8.self))
            } catch {
                return .failure(error)
            }
        }
        let restartWaiter = Task { await restartable.asyncExecute() }
        await waitUntil { restartable.isExecuting }
        restartable.clearResult(ongoingExecutionStrategy: .restart)
        let restarted = await restartWaiter.value
        record.expect("clearResult(.restart) delivers a fresh result", (try? restarted.get()) != nil, equals: true)
        record.expect("executions for a restarted run (discarded + fresh)", restartable.counters.loads, equals: 2)

        // .allowCompletion: the running execution completes normally and is cached.
        let allowWaiter = Task { await profile.asyncExecute(forceUpdate: true) }
        await waitUntil { profile.isExecuting }
        profile.clearResult(ongoingExecutionStrategy: .allowCompletion)
        let allowed = await allowWaiter.value
        record.expect("clearResult(.allowCompletion) lets the run finish", (try? allowed.get()) != nil, equals: true)
        record.expect("…and its result is cached", profile.currentResult != nil, equals: true)

        // 3. A flaky upstream (503 twice, then 200) recovered by retries with exponential backoff.
        let flaky = MonoTask<String>(
            retry: .count(count: 3, intervalProxy: .exponential(initial: .milliseconds(50), scaleRate: 2)),
            resultExpireDuration: .seconds(30)
        ) {
            do {
                let (data, response) = try await context.fetch("/flaky?key=demo-monotask")
                guard response.statusCode == 200 else { throw DemoError.status(response.statusCode) }
                return .success(String(decoding: data, as: UTF8.self))
            } catch {
                return .failure(error)
            }
        }
        let flakyStart = ContinuousClock.now
        let recovered = await flaky.asyncExecute()
        record.measure("flaky upstream", "succeeded after \(flaky.counters.retries) retries in \(flakyStart.duration(to: .now).milliseconds)")
        record.expect("flaky upstream result", (try? recovered.get()) ?? "failed", equals: "recovered demo-monotask")
        record.expect("retries used", flaky.counters.retries, equals: 2)

        // 4. The same 50 concurrent callers of a profile nobody loaded yet, each sending its own
        //    request, then through one MonoTask.
        let comparedCallers = 50
        let profileRequests: @Sendable (LoopbackServer) async -> Int = { await $0.hits(.profile) }
        let naive = await measuredRun(server, counting: profileRequests) {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<comparedCallers {
                    group.addTask { _ = try? await context.fetch("/profile?user=linus") }
                }
            }
        }
        let linus = MonoTask<String>(resultExpireDuration: .seconds(60)) {
            do {
                let (data, _) = try await context.fetch("/profile?user=linus")
                return .success(String(decoding: data, as: UTF8.self))
            } catch {
                return .failure(error)
            }
        }
        let shared = await measuredRun(server, counting: profileRequests) {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<comparedCallers {
                    group.addTask { _ = await linus.asyncExecute() }
                }
            }
        }
        record.compare(
            "monotask", workload: "\(comparedCallers) concurrent callers of one profile", counted: "GET /profile",
            naive: naive, taskKit: shared
        )
    }
}

enum DemoError: Error, CustomStringConvertible {
    case status(Int)
    case unexpected(String)

    var description: String {
        switch self {
        case .status(let code): return "HTTP status \(code)"
        case .unexpected(let text): return text
        }
    }
}

/// Polls `condition` every millisecond for up to five seconds (the demo observes real work).
func waitUntil(_ condition: @Sendable () -> Bool) async {
    let deadline = ContinuousClock.now.advanced(by: .seconds(5))
    while !condition() && ContinuousClock.now < deadline {
        try? await Task.sleep(for: .milliseconds(1))
    }
}
#endif
