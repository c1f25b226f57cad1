#if Examples
import Foundation
import TaskKit
import TaskKitLoopbackServer
import TaskKitTestSupport
import TaskKitTesting
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP

/// HTTPRetryPolicy inside URLTaskManager, against the loopback server; every wait is on the
/// manager's ManualClock.
@Suite("HTTPRetryPolicy against a loopback server", .serialized)  // one test at a time: each starts its own server and up to 50 requests
struct HTTPRetryPolicyServerTests {
    func manager(
        _ policy: HTTPRetryPolicy = httpTestRetryPolicy(), over kind: HTTPTestTransport, clock: ManualClock
    ) -> (URLTaskManager, HTTPTestRecordingTransport) {
        let transport = HTTPTestRecordingTransport(kind.make())
        return (URLTaskManager(interceptors: [policy], transport: transport, clock: clock), transport)
    }

    @Test("a flaky GET is retried with exponential backoff until it succeeds", arguments: HTTPTestTransport.allCases)
    func flakyGetRecovers(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let (manager, _) = manager(over: transport, clock: clock)
            let request = Task { try await manager.response(for: URLRequest(url: server.url("/flaky?key=get"))) }
            #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(1))
            #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(2))
            let response = try await request.boundedValue()
            #expect(response.statusCode == 200)
            #expect(String(decoding: response.data, as: UTF8.self) == "recovered get")
            #expect(await server.hits(.flaky) == 3)
            #expect(clock.totalSleeps == 2)
        }
    }

    @Test("backoff is capped, and the budget ends with the last response returned", arguments: HTTPTestTransport.allCases)
    func backoffCapAndBudget(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer(knobs: httpTestKnobs { $0.failuresBeforeSuccess = 10 }) { server in
            let clock = ManualClock()
            let (manager, _) = manager(httpTestRetryPolicy(count: 4), over: transport, clock: clock)
            let request = Task { try await manager.response(for: URLRequest(url: server.url("/flaky?key=cap"))) }
            var delays: [Duration?] = []
            for _ in 0..<4 { delays.append(await clock.httpTestAdvanceToNextSleeper()) }
            #expect(delays == [.seconds(1), .seconds(2), .seconds(3), .seconds(3)])
            let response = try await request.boundedValue()
            #expect(response.statusCode == 503)
            #expect(await server.hits(.flaky) == 5)
        }
    }

    @Test("full jitter keeps each delay within 0...the exponential delay", arguments: HTTPTestTransport.allCases)
    func jitterBounds(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer(knobs: httpTestKnobs { $0.failuresBeforeSuccess = 3 }) { server in
            for round in 0..<5 {
                let clock = ManualClock()
                let (manager, _) = manager(httpTestRetryPolicy(count: 3, jitter: .full), over: transport, clock: clock)
                let request = Task { try await manager.response(for: URLRequest(url: server.url("/flaky?key=jitter\(round)"))) }
                for bound in [1, 2, 3] {
                    let delay = try #require(await clock.httpTestAdvanceToNextSleeper())
                    #expect(delay >= .zero && delay <= .seconds(bound))
                }
                let status = try await request.boundedValue().statusCode
                #expect(status == 200)
            }
        }
    }

    @Test("a POST is not retried by default; opting in retries it", arguments: HTTPTestTransport.allCases)
    func postNotRetriedByDefault(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let (manager, _) = manager(over: transport, clock: clock)
            var post = URLRequest(url: server.url("/flaky?key=post"))
            post.httpMethod = "POST"
            let response = try await manager.response(for: post)
            #expect(response.statusCode == 503)
            #expect(await server.hits(.flaky) == 1)
            #expect(clock.totalSleeps == 0)

            var optedIn = httpTestRetryPolicy()
            optedIn.retryableMethods.insert("POST")
            let (retrying, _) = self.manager(optedIn, over: transport, clock: clock)
            let request = Task { try await retrying.response(for: post) }
            #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(1))
            let status = try await request.boundedValue().statusCode
            #expect(status == 200)
            #expect(await server.hits(.flaky) == 3)
        }
    }

    @Test("each retryable status is retried; other statuses are returned at once", arguments: HTTPTestTransport.allCases)
    func retryableStatuses(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            for status in [408, 429, 500, 502, 503, 504] {
                let clock = ManualClock()
                let (manager, transport) = manager(httpTestRetryPolicy(count: 1), over: transport, clock: clock)
                let request = Task { try await manager.response(for: URLRequest(url: server.url("/status?code=\(status)"))) }
                #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(1), "\(status)")
                let received = try await request.boundedValue().statusCode
                #expect(received == status)
                #expect(transport.requests.count == 2, "\(status)")
            }
            for status in [200, 400, 401, 403, 404, 501] {
                let clock = ManualClock()
                let (manager, transport) = manager(httpTestRetryPolicy(count: 1), over: transport, clock: clock)
                let received = try await manager.response(for: URLRequest(url: server.url("/status?code=\(status)"))).statusCode
                #expect(received == status)
                #expect(transport.requests.count == 1, "\(status)")
                #expect(clock.totalSleeps == 0)
            }
        }
    }

    @Test("429 with Retry-After in seconds waits that long", arguments: HTTPTestTransport.allCases)
    func retryAfterSeconds(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let (manager, _) = manager(over: transport, clock: clock)
            let request = Task {
                try await manager.response(for: URLRequest(url: server.url("/ratelimited?key=s&mode=seconds&after=2")))
            }
            #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(2))
            let status = try await request.boundedValue().statusCode
            #expect(status == 200)
            #expect(await server.hits(.ratelimited) == 2)
        }
    }

    @Test("Retry-After longer than the cap is bounded by the cap", arguments: HTTPTestTransport.allCases)
    func retryAfterBoundedByCap(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            for mode in ["seconds", "date"] {
                let clock = ManualClock()
                let (manager, _) = manager(over: transport, clock: clock)
                let request = Task {
                    try await manager.response(for: URLRequest(url: server.url("/ratelimited?key=cap-\(mode)&mode=\(mode)&after=3600")))
                }
                #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(3), "\(mode)")
                let status = try await request.boundedValue().statusCode
                #expect(status == 200)
            }
        }
    }

    @Test("429 with Retry-After as an HTTP-date waits until that date", arguments: HTTPTestTransport.allCases)
    func retryAfterDate(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            // The policy's wall clock and the server's date are pinned to the same instant, so
            // the date says exactly 10 s. Backoff of 0.1 s, so the date decides; the cap is 30 s.
            let now = Date(timeIntervalSince1970: 1_800_000_000)
            let policy = HTTPRetryPolicy(
                retry: .count(count: 1, intervalProxy: .exponential(initial: .milliseconds(100), maximumDelay: .seconds(30))),
                currentDate: { now }
            )
            let (manager, _) = manager(policy, over: transport, clock: clock)
            let request = Task {
                try await manager.response(
                    for: URLRequest(url: server.url("/ratelimited?key=d&mode=date&after=10&from=1800000000"))
                )
            }
            #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(10))
            let status = try await request.boundedValue().statusCode
            #expect(status == 200)
        }
    }

    @Test("cancelling a request during its backoff cancels the wait", arguments: HTTPTestTransport.allCases)
    func cancelDuringBackoff(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let (manager, _) = manager(over: transport, clock: clock)
            let request = Task { try await manager.response(for: URLRequest(url: server.url("/flaky?key=cancel"))) }
            await eventually(pollingEvery: .milliseconds(5)) { clock.sleeperCount == 1 }
            request.cancel()
            await #expect(throws: CancellationError.self) { _ = try await request.boundedValue() }
            await eventually(pollingEvery: .milliseconds(5)) { clock.sleeperCount == 0 }
            #expect(await server.hits(.flaky) == 1)
        }
    }

    @Test("the deadline covers the retries: it fires during a backoff", arguments: HTTPTestTransport.allCases)
    func deadlineCoversRetries(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let manager = URLTaskManager(interceptors: [httpTestRetryPolicy()], transport: transport.make(), timeout: .milliseconds(1500), clock: clock)
            let request = Task { try await manager.response(for: URLRequest(url: server.url("/flaky?key=deadline"))) }
            // Two sleepers: the deadline (1.5 s) and the first backoff (1 s).
            await eventually(pollingEvery: .milliseconds(5)) { clock.sleeperCount == 2 }
            clock.advance(by: .seconds(1))
            await eventually(pollingEvery: .milliseconds(5)) { clock.sleeperCount == 2 }  // the deadline and the 2 s backoff
            clock.advance(by: .milliseconds(500))
            let error = await #expect(throws: TaskError.self) { _ = try await request.boundedValue() }
            guard case .timedOut? = error else {
                Issue.record("expected TaskError.timedOut, got \(String(describing: error))")
                return
            }
            #expect(await server.hits(.flaky) == 2)
        }
    }
}
#endif
