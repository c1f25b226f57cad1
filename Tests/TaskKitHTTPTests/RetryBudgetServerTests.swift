#if Examples
import Foundation
import MetricsTestKit
import TaskKit
import TaskKitLoopbackServer
import TaskKitTestSupport
import TaskKitTesting
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP

/// `URLTaskManager(retryBudget:)` against the loopback server, over both transports.
@Suite("URLTaskManager retry budget against a loopback server", .serialized, .scaledTimeLimit(minutes: 2))
struct RetryBudgetServerTests {
    /// Three immediate retries of a retryable status (no backoff, so no clock is needed to retry).
    static let threeRetries = HTTPRetryPolicy(retry: .count(count: 3))

    @Test("a host failing 100%: without a budget 4 requests per caller; with 20% and a floor of 3, retries stay within it and every caller gets the last 503", arguments: HTTPTestTransport.allCases)
    func failingHost(_ transport: HTTPTestTransport) async throws {
        _ = processTestMetrics
        let label = "retry-budget-\(transport.rawValue)"
        try await withHTTPTestServer { server in
            let failing = URLRequest(url: server.url("/status?code=503"))
            let unbounded = URLTaskManager(interceptors: [Self.threeRetries], transport: transport.make(), clock: ManualClock())
            for _ in 0..<10 {
                #expect(try await unbounded.data(for: failing).1.statusCode == 503)
            }
            #expect(await server.hits(.status) == 40, "amplification without a budget: 4x")

            let clock = ManualClock()
            let manager = URLTaskManager(
                interceptors: [Self.threeRetries], transport: transport.make(),
                retryBudget: RetryBudget(ratio: 0.2, window: .seconds(10), minimumRetries: 3), clock: clock, metricsLabel: label
            )
            let ledger = try #require(manager.retryBudget)
            let host = try #require(HostConcurrencyLimit.host(of: server.baseURL))
            // One after another, the counts are exact: the first caller spends the floor (4
            // requests), callers 2–16 get one request each, the 17th finds 20 requests (0.2 × 20
            // = 4 retries) and retries once, callers 18–20 get one each.
            for _ in 0..<20 {
                #expect(try await manager.data(for: failing).1.statusCode == 503)
            }
            #expect(await server.hits(.status) == 40 + 24)
            #expect(ledger.totals(of: host).attempts == 24 && ledger.totals(of: host).retries == 4)
            #expect(processTestMetrics.counterTotal(label: "taskkit_http_retry_budget_exhausted", dimensions: [("name", label)]) == 19)

            // Fifty callers at once: the budget holds however their attempts interleave.
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<50 {
                    group.addTask { try await manager.data(for: failing).1.statusCode }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 503, count: 50), "every caller gets the last 503")
            let requests = await server.hits(.status) - 64
            let (attempts, retries) = ledger.totals(of: host)
            #expect(attempts == 24 + requests && retries == attempts - 70)
            #expect(Double(retries) <= 0.2 * Double(attempts) + 3, "retries \(retries) of \(attempts) requests")
            #expect(requests < 50 * 4 / 2)

            // A window later the floor is there again: a lone caller retries three times.
            clock.advance(by: .seconds(10))
            #expect(try await manager.data(for: failing).1.statusCode == 503)
            #expect(await server.hits(.status) == 64 + requests + 4)
        }
    }

    @Test("a spent budget returns a 429 with Retry-After at once, without waiting", arguments: HTTPTestTransport.allCases)
    func retryAfterSpent(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let manager = URLTaskManager(
                interceptors: [HTTPRetryPolicy()], transport: transport.make(),
                retryBudget: RetryBudget(ratio: 0, minimumRetries: 0), clock: clock
            )
            let response = try await manager.response(for: URLRequest(url: server.url("/ratelimited?key=spent&mode=seconds&after=5")))
            #expect(response.statusCode == 429)
            #expect(clock.sleeperCount == 0, "no wait for a retry that is not made")
            #expect(await server.hits(.ratelimited) == 1)
        }
    }

    /// Replays every `503` twice, as an authenticator replays a `401`.
    struct Replayer: URLTaskInterceptor {
        func retry(
            _ request: URLRequest, for task: URLTask, dueTo outcome: Result<URLTaskResponse, any Error>, context: URLTaskContext
        ) async throws -> URLTaskRetryDecision {
            context.retriesMade < 2 ? .replay : .doNotRetry
        }
    }

    @Test("a replay (a request sent again with a new token) never spends the budget", arguments: HTTPTestTransport.allCases)
    func replayIsFree(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(
                interceptors: [Replayer()], transport: transport.make(),
                retryBudget: RetryBudget(ratio: 0, minimumRetries: 0), clock: ManualClock()
            )
            let status = try await manager.data(for: URLRequest(url: server.url("/status?code=503"))).1.statusCode
            #expect(status == 503)
            #expect(await server.hits(.status) == 3)
        }
    }

    @Test("a caller cancelled while waiting for its retry gives the retry back", arguments: HTTPTestTransport.allCases)
    func cancelledRetryIsTakenBack(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let manager = URLTaskManager(
                interceptors: [HTTPRetryPolicy(retry: .count(count: 1, intervalProxy: .fixed(.seconds(1))))], transport: transport.make(),
                retryBudget: RetryBudget(ratio: 0, minimumRetries: 1), clock: clock
            )
            let ledger = try #require(manager.retryBudget)
            let host = try #require(HostConcurrencyLimit.host(of: server.baseURL))
            let failing = URLRequest(url: server.url("/status?code=503"))
            let waiting = Task { try await manager.data(for: failing) }
            await eventually("the retry waits on the clock", pollingEvery: .milliseconds(2)) { clock.sleeperCount == 1 }
            #expect(ledger.totals(of: host).retries == 1)
            waiting.cancel()
            await #expect(throws: CancellationError.self) { _ = try await waiting.boundedValue() }
            #expect(ledger.totals(of: host).attempts == 1 && ledger.totals(of: host).retries == 0)
            // The floor's one retry is free again.
            let next = Task { try await manager.data(for: failing) }
            #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(1))
            #expect(try await next.boundedValue().1.statusCode == 503)
            #expect(await server.hits(.status) == 3)
        }
    }
}
#endif
