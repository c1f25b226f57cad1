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

/// `URLTaskManager(hedging:)` against the loopback server, over both transports. The server's
/// `/slow-first` answers a key's first call late and later calls at once, with the call's number
/// as the body: `"2"` means the hedge won.
@Suite("URLTaskManager hedging against a loopback server", .serialized, .scaledTimeLimit(minutes: 2))
struct HedgingServerTests {
    func request(_ server: LoopbackServer, _ path: String, method: String = "GET", idempotencyKey: String? = nil) -> URLRequest {
        var request = URLRequest(url: server.url(path))
        request.httpMethod = method
        if let idempotencyKey { request.setValue(idempotencyKey, forHTTPHeaderField: "Idempotency-Key") }
        return request
    }

    func body(_ manager: URLTaskManager, _ request: URLRequest) -> Task<String, any Error> {
        Task { String(decoding: try await manager.data(for: request).0, as: UTF8.self) }
    }

    @Test("no response after the delay: a hedge goes out, the first response wins, the slow copy is cancelled", arguments: HTTPTestTransport.allCases)
    func hedgeWins(_ transport: HTTPTestTransport) async throws {
        _ = processTestMetrics
        let label = "hedging-\(transport.rawValue)"
        try await withHTTPTestServer { server throws in
            let clock = ManualClock()
            let manager = URLTaskManager(
                transport: transport.make(), hedging: HedgingPolicy(delay: .milliseconds(100)), clock: clock, metricsLabel: label
            )
            let slow = body(manager, request(server, "/slow-first?key=win-\(transport.rawValue)&ms=3600000"))
            await server.httpTestServed(.slowFirst, 1)
            await clock.httpTestSleepers(1)
            clock.advance(by: .milliseconds(100))
            // The slow copy answers after an hour (past any deadline, even scaled for a sanitizer run): an answer within the deadline is the hedge's,
            // and the caller did not wait for the slow copy. (No bound tighter than the deadline:
            // a loaded sanitizer run can hold a task for tens of seconds.)
            #expect(try await slow.boundedValue(within: TestDeadline.scaled(.seconds(90))) == "2", "the hedge's response")
            #expect(await server.hits(.slowFirst) == 2)
            #expect(processTestMetrics.counterTotal(label: "taskkit_http_hedges", dimensions: [("name", label)]) == 1)
            #expect(processTestMetrics.counterTotal(label: "taskkit_http_hedges_won", dimensions: [("name", label)]) == 1)

            // A response before the delay: no hedge, and the delay's wait is cancelled.
            let fast = try await manager.data(for: request(server, "/slow-first?key=fast-\(transport.rawValue)&ms=0"))
            #expect(String(decoding: fast.0, as: UTF8.self) == "1")
            await clock.httpTestSleepers(0)
            #expect(await server.hits(.slowFirst) == 3)
        }
    }

    @Test("never a POST without Idempotency-Key; a POST with one is hedged", arguments: HTTPTestTransport.allCases)
    func onlyRequestsThatMayBeSentTwice(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server throws in
            let clock = ManualClock()
            let manager = URLTaskManager(transport: transport.make(), hedging: HedgingPolicy(delay: .milliseconds(100)), clock: clock)
            let post = body(manager, request(server, "/slow-first?key=post-\(transport.rawValue)&ms=300", method: "POST"))
            try await Task.sleep(for: .milliseconds(50))
            #expect(clock.sleeperCount == 0, "no hedge is even planned")
            #expect(try await post.boundedValue() == "1")
            #expect(await server.hits(.slowFirst) == 1)

            let keyed = body(
                manager,
                request(server, "/slow-first?key=keyed-\(transport.rawValue)&ms=3600000", method: "POST", idempotencyKey: "order-1")
            )
            await server.httpTestServed(.slowFirst, 2)
            await clock.httpTestSleepers(1)
            clock.advance(by: .milliseconds(100))
            #expect(try await keyed.boundedValue(within: TestDeadline.scaled(.seconds(90))) == "2")
            #expect(await server.hits(.slowFirst) == 3)
        }
    }

    @Test("hedges spend the retry budget: with the floor spent, no hedge is sent", arguments: HTTPTestTransport.allCases)
    func hedgesSpendTheBudget(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server throws in
            let clock = ManualClock()
            let manager = URLTaskManager(
                transport: transport.make(), retryBudget: RetryBudget(ratio: 0, minimumRetries: 1),
                hedging: HedgingPolicy(delay: .milliseconds(100)), clock: clock
            )
            let first = body(manager, request(server, "/slow-first?key=budget1-\(transport.rawValue)&ms=3600000"))
            await server.httpTestServed(.slowFirst, 1)
            await clock.httpTestSleepers(1)
            clock.advance(by: .milliseconds(100))
            #expect(try await first.boundedValue(within: TestDeadline.scaled(.seconds(90))) == "2", "the floor's one retry paid for this hedge")

            let second = body(manager, request(server, "/slow-first?key=budget2-\(transport.rawValue)&ms=400"))
            await server.httpTestServed(.slowFirst, 3)
            await clock.httpTestSleepers(1)
            clock.advance(by: .milliseconds(100))
            #expect(try await second.boundedValue() == "1", "no budget left: the slow copy's own answer")
            #expect(await server.hits(.slowFirst) == 3)
        }
    }

    @Test("a caller cancelled while its copy waits gets CancellationError at once; no hedge is sent after", arguments: HTTPTestTransport.allCases)
    func cancelledCallerLeavesAtOnce(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server throws in
            let clock = ManualClock()
            let manager = URLTaskManager(transport: transport.make(), hedging: HedgingPolicy(delay: .milliseconds(100)), clock: clock)
            let call = body(manager, request(server, "/slow-first?key=cancel-\(transport.rawValue)&ms=3600000"))
            await server.httpTestServed(.slowFirst, 1)
            await clock.httpTestSleepers(1)
            call.cancel()
            // The slow copy answers after an hour (past any deadline, even scaled for a sanitizer run): leaving within the deadline is leaving at once.
            await #expect(throws: CancellationError.self) { try await call.boundedValue(within: TestDeadline.scaled(.seconds(90))) }
            // The delay's wait ended with the attempt: advancing the clock sends nothing.
            await clock.httpTestSleepers(0)
            clock.advance(by: .seconds(1))
            try await Task.sleep(for: .milliseconds(50))
            #expect(await server.hits(.slowFirst) == 1)
        }
    }
}
#endif
