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

/// `URLTaskManager(circuitBreaker:)` against the loopback server, over both transports.
@Suite("URLTaskManager circuit breaker against a loopback server", .serialized, .scaledTimeLimit(minutes: 2))
struct CircuitBreakerServerTests {
    @Test("a failing host: the circuit opens, attempts fail at once without reaching it, a probe after the break closes it", arguments: HTTPTestTransport.allCases)
    func opensAndCloses(_ transport: HTTPTestTransport) async throws {
        _ = processTestMetrics
        let label = "circuit-\(transport.rawValue)"
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let manager = URLTaskManager(
                transport: transport.make(), circuitBreaker: CircuitBreakerPolicy(minimumRequests: 4, breakDuration: .seconds(5)),
                clock: clock, metricsLabel: label
            )
            let breaker = try #require(manager.circuitBreaker)
            let host = try #require(HostConcurrencyLimit.host(of: server.baseURL))
            let failing = URLRequest(url: server.url("/status?code=503"))
            let healthy = URLRequest(url: server.url("/status?code=200"))
            for _ in 0..<4 {
                #expect(try await manager.data(for: failing).1.statusCode == 503)
            }
            #expect(breaker.phase(of: host) == .open(until: .seconds(5)))
            await #expect(throws: URLTaskError.circuitOpen(host: host, retryIn: .seconds(5))) {
                _ = try await manager.data(for: healthy)
            }
            clock.advance(by: .seconds(2))
            await #expect(throws: URLTaskError.circuitOpen(host: host, retryIn: .seconds(3))) {
                _ = try await manager.data(for: healthy)
            }
            #expect(await server.hits(.status) == 4, "an open circuit sends nothing")
            clock.advance(by: .seconds(3))
            #expect(try await manager.data(for: healthy).1.statusCode == 200, "the probe")
            #expect(breaker.phase(of: host) == .closed)
            #expect(await server.hits(.status) == 5)

            func transitions(_ state: String) -> Int64 {
                processTestMetrics.counterTotal(label: "taskkit_http_circuit_transitions", dimensions: [("name", label), ("state", state)])
            }
            #expect(transitions("open") == 1 && transitions("half_open") == 1 && transitions("closed") == 1)
            #expect(processTestMetrics.counterTotal(label: "taskkit_http_circuit_rejections", dimensions: [("name", label)]) == 2)
        }
    }

    @Test("a caller's cancellation and a passed deadline never count as failures", arguments: HTTPTestTransport.allCases)
    func cancellationDoesNotCount(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer(knobs: httpTestKnobs { $0.profileDelay = 0 }) { server in
            await server.holdProfiles()
            let clock = ManualClock()
            // One counted failure would open the circuit.
            let manager = URLTaskManager(
                transport: transport.make(), circuitBreaker: CircuitBreakerPolicy(minimumRequests: 1), clock: clock
            )
            let breaker = try #require(manager.circuitBreaker)
            let host = try #require(HostConcurrencyLimit.host(of: server.baseURL))
            let url = server.url("/profile?user=held")

            let cancelled = Task { try await manager.data(for: URLRequest(url: url)) }
            await eventually("the request reached the server", pollingEvery: .milliseconds(2)) { await server.hits(.profile) == 1 }
            cancelled.cancel()
            await #expect(throws: CancellationError.self) { _ = try await cancelled.boundedValue() }
            #expect(breaker.phase(of: host) == .closed)

            let timed = Task { try await manager.data(for: URLRequest(url: url), timeout: .seconds(1)) }
            await eventually("the request reached the server", pollingEvery: .milliseconds(2)) { await server.hits(.profile) == 2 }
            await eventually("the deadline sleeps on the clock", pollingEvery: .milliseconds(2)) { clock.sleeperCount == 1 }
            clock.advance(by: .seconds(1))
            await expectTimedOut(timed)
            #expect(breaker.phase(of: host) == .closed)
            await server.releaseProfiles()
            #expect(try await manager.data(for: URLRequest(url: url)).1.statusCode == 200)
        }
    }
}
#endif
