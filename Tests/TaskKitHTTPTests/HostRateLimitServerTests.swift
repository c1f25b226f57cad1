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

/// `URLTaskManager(rateLimit:)` against the loopback server, over both transports.
@Suite("URLTaskManager rate limit against a loopback server", .serialized, .scaledTimeLimit(minutes: 2))
struct HostRateLimitServerTests {
    /// Starts `request` in a task of its own.
    func caller(_ manager: URLTaskManager, _ url: URL, timeout: Duration? = nil) -> Task<(Data, HTTPURLResponse), any Error> {
        Task { try await manager.data(for: URLRequest(url: url), timeout: timeout) }
    }


    @Test("a burst at once, then one request per interval of the clock, in arrival order; metrics count tokens and waits", arguments: HTTPTestTransport.allCases)
    func paced(_ transport: HTTPTestTransport) async throws {
        _ = processTestMetrics
        let label = "rate-limit-\(transport.rawValue)"
        try await withHTTPTestServer { server throws in
            let clock = ManualClock()
            let manager = URLTaskManager(
                transport: transport.make(), rateLimit: HostRateLimit(requestsPerSecond: 10, burst: 3), clock: clock,
                metricsLabel: label
            )
            let callers = (0..<13).map { _ in caller(manager, server.url("/concurrent?ms=0")) }
            await server.httpTestServed(.concurrent, 3)
            await clock.httpTestSleepers(10)
            for step in 1...10 {
                clock.advance(by: .milliseconds(100))
                await server.httpTestServed(.concurrent, 3 + step)
                #expect(clock.sleeperCount == 10 - step)
            }
            for caller in callers { #expect(try await caller.boundedValue().1.statusCode == 200) }
            let dimensions = [("name", label)]
            #expect(processTestMetrics.counterTotal(label: "taskkit_http_rate_limit_tokens", dimensions: dimensions) == 13)
            #expect(try processTestMetrics.expectTimer("taskkit_http_rate_limit_wait", dimensions).values.count == 10)
            #expect(try processTestMetrics.expectMeter("taskkit_http_rate_limit_waiting", dimensions).lastValue == 0)
        }
    }

    @Test("on the real clock the server never reads more than rate + burst requests in a second", arguments: HTTPTestTransport.allCases)
    func serverCountsPerSecond(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server throws in
            let manager = URLTaskManager(transport: transport.make(), rateLimit: HostRateLimit(requestsPerSecond: 20, burst: 2))
            let host = "\(server.baseURL.host!):\(server.baseURL.port!)"
            // Two connections opened first, so that connecting does not delay the first requests
            // and bunch the later ones at the server; then the bucket refills (100 ms).
            _ = try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<2 { group.addTask { _ = try await manager.data(for: URLRequest(url: server.url("/concurrent?ms=0"))) } }
                try await group.waitForAll()
            }
            try await Task.sleep(for: .milliseconds(300))
            let warmUp = await server.concurrency(host: host).arrivals.count
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<30 {
                    group.addTask { try await manager.data(for: URLRequest(url: server.url("/concurrent?ms=0"))).1.statusCode }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 30))
            let arrivals = Array(await server.concurrency(host: host).arrivals.dropFirst(warmUp)).sorted()
            #expect(arrivals.count == 30)
            // Any window of 800 ms: the 200 ms left of the second absorb up to 100 ms of delivery
            // jitter on each side (a loaded CI machine).
            let busiest = arrivals.indices.map { i in arrivals[i...].prefix { arrivals[i].duration(to: $0) <= .milliseconds(800) }.count }.max()
            #expect(busiest ?? 0 <= 22, "at most 20 a second plus a burst of 2, got \(busiest ?? 0)")
            #expect(arrivals.first!.duration(to: arrivals.last!) >= .milliseconds(1_200), "30 requests at 20 a second after a burst of 2 take 1.4 s")
        }
    }

    @Test("a 429 with Retry-After: 2 pauses every caller of the host for 2 s, then the bucket restarts empty", arguments: HTTPTestTransport.allCases)
    func retryAfterPausesTheHost(_ transport: HTTPTestTransport) async throws {
        _ = processTestMetrics
        let label = "rate-limit-pause-\(transport.rawValue)"
        try await withHTTPTestServer { server throws in
            let clock = ManualClock()
            let manager = URLTaskManager(
                transport: transport.make(), rateLimit: HostRateLimit(requestsPerSecond: 100, burst: 10), clock: clock,
                metricsLabel: label
            )
            let limiter = try #require(manager.rateLimiter)
            let host = try #require(HostConcurrencyLimit.host(of: server.baseURL))
            let answer = try await manager.data(for: URLRequest(url: server.url("/ratelimited?key=pause&mode=seconds&after=2")))
            #expect(answer.1.statusCode == 429)
            #expect(limiter.isPaused(host))
            #expect(!limiter.isPaused("elsewhere.example:443"))

            let callers = (0..<5).map { _ in caller(manager, server.url("/concurrent?ms=0")) }
            await clock.httpTestSleepers(5)
            clock.advance(by: .milliseconds(1_990))
            #expect(clock.sleeperCount == 5, "nobody's time came")
            try await Task.sleep(for: .milliseconds(50))
            #expect(await server.hits(.concurrent) == 0, "paused: nothing reached the host")
            clock.advance(by: .milliseconds(10))
            await server.httpTestServed(.concurrent, 1)
            clock.advance(by: .milliseconds(40))
            for caller in callers { #expect(try await caller.boundedValue().1.statusCode == 200) }
            #expect(!limiter.isPaused(host))
            #expect(processTestMetrics.counterTotal(label: "taskkit_http_host_pauses", dimensions: [("name", label)]) == 1)
        }
    }

    @Test("a waiting request whose deadline passes fails with TaskError.timedOut; a cancelled one leaves at once and gives its token back; one past maximumWait is refused at once", arguments: HTTPTestTransport.allCases)
    func deadlinesAndRefusals(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server throws in
            let clock = ManualClock()
            let recorder = HTTPTestRecordingTransport(transport.make())
            let manager = URLTaskManager(
                transport: recorder, rateLimit: HostRateLimit(requestsPerSecond: 1, burst: 1, maximumWait: .milliseconds(2_500)),
                clock: clock
            )
            #expect(try await manager.data(for: URLRequest(url: server.url("/concurrent?ms=0&n=first"))).1.statusCode == 200)
            // Its token comes at 1 s; its deadline at 0.5 s.
            let timed = caller(manager, server.url("/concurrent?ms=0&n=timed"), timeout: .milliseconds(500))
            await clock.httpTestSleepers(2)
            // Token at 2 s, then it leaves: the newest reservation, so its token goes back.
            let cancelled = caller(manager, server.url("/concurrent?ms=0&n=cancelled"))
            await clock.httpTestSleepers(3)
            cancelled.cancel()
            await #expect(throws: CancellationError.self) { _ = try await cancelled.boundedValue() }
            // The patient caller gets the 2 s token back; the next would wait 3 s > 2.5 s.
            let patient = caller(manager, server.url("/concurrent?ms=0&n=patient"))
            await clock.httpTestSleepers(3)
            let refused = await #expect(throws: URLTaskError.self) {
                _ = try await manager.data(for: URLRequest(url: server.url("/concurrent?ms=0&n=refused")))
            }
            guard case .rateLimited(let refusedHost, let retryIn)? = refused else {
                Issue.record("expected URLTaskError.rateLimited, got \(String(describing: refused))")
                return
            }
            #expect(refusedHost == HostConcurrencyLimit.host(of: server.baseURL) && retryIn == .seconds(3))

            clock.advance(by: .milliseconds(500))
            await expectTimedOut(timed)
            clock.advance(by: .milliseconds(1_500))
            #expect(try await patient.boundedValue().1.statusCode == 200)
            #expect(recorder.requests.map { $0.url?.query } == ["ms=0&n=first", "ms=0&n=patient"], "nobody who left or was refused was sent")
        }
    }
}
#endif
