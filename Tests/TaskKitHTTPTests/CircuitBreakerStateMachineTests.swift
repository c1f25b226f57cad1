import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP

@Suite("Circuit breaker: the state machine (pure)")
struct CircuitBreakerStateMachineTests {
    typealias Machine = CircuitBreakerStateMachine

    /// The machine behind methods an `#expect` can call (a macro's expression cannot mutate a
    /// local value); time is whole seconds.
    final class Circuit {
        var machine: Machine
        init(_ policy: CircuitBreakerPolicy) { machine = Machine(policy: policy) }

        func admit(_ host: String = "h", at second: Int) -> Machine.Admission { machine.admit(host: host, now: .seconds(second)).0 }
        func transition(_ host: String = "h", at second: Int) -> Machine.Transition? { machine.admit(host: host, now: .seconds(second)).1 }
        func record(_ host: String = "h", probe: Bool = false, failed: Bool, at second: Int) -> Machine.Transition? {
            machine.record(host: host, probe: probe, failed: failed, now: .seconds(second))
        }
        /// `count` attempts admitted and ended at `second`, failed or not.
        func attempts(_ count: Int, failed: Bool, at second: Int) {
            for _ in 0..<count {
                _ = machine.admit(host: "h", now: .seconds(second))
                _ = machine.record(host: "h", probe: false, failed: failed, now: .seconds(second))
            }
        }
        var phase: Machine.Phase? { machine.hosts["h"]?.phase }
    }

    @Test("the default failure test: an error, a 5xx, a 429 with Retry-After; not a 429 without one, not a 4xx")
    func defaultFailures() throws {
        let url = try #require(URL(string: "https://api.example.com/"))
        func response(_ status: Int, _ headers: [String: String] = [:]) -> Result<HTTPURLResponse, any Error> {
            .success(HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!)
        }
        let isFailure = CircuitBreakerPolicy.defaultIsFailure
        #expect(isFailure(.failure(URLError(.timedOut))))
        #expect(isFailure(response(503)) && isFailure(response(500)))
        #expect(isFailure(response(429, ["Retry-After": "2"])))
        #expect(!isFailure(response(429)) && !isFailure(response(404)) && !isFailure(response(200)))
    }

    @Test("closed: opens once the window holds minimumRequests outcomes with failureRatio failures")
    func opensOnRatio() {
        let c = Circuit(CircuitBreakerPolicy(failureRatio: 0.5, minimumRequests: 4, window: .seconds(10), breakDuration: .seconds(5)))
        c.attempts(2, failed: true, at: 0)
        #expect(c.phase == .closed, "too few outcomes to judge")
        c.attempts(1, failed: false, at: 1)
        #expect(c.admit(at: 1) == .allowed(probe: false))
        #expect(c.record(failed: true, at: 1) == .opened, "3 failures of 4")
        #expect(c.phase == .open(until: .seconds(6)))
    }

    @Test("outcomes older than the window do not count")
    func windowSlides() {
        let c = Circuit(CircuitBreakerPolicy(failureRatio: 0.5, minimumRequests: 4, window: .seconds(10)))
        c.attempts(3, failed: true, at: 0)
        c.attempts(3, failed: false, at: 11)  // the failures at 0 left the window
        #expect(c.admit(at: 11) == .allowed(probe: false))
        #expect(c.record(failed: true, at: 11) == nil, "1 failure of 4 in the window")
        #expect(c.phase == .closed)
    }

    @Test("consecutiveFailures opens the circuit before the minimum; a success resets the run")
    func opensOnConsecutiveFailures() {
        let c = Circuit(CircuitBreakerPolicy(minimumRequests: 100, consecutiveFailures: 3))
        c.attempts(2, failed: true, at: 0)
        c.attempts(1, failed: false, at: 0)
        c.attempts(2, failed: true, at: 0)
        #expect(c.phase == .closed)
        #expect(c.admit(at: 0) == .allowed(probe: false))
        #expect(c.record(failed: true, at: 0) == .opened)
    }

    @Test("open: refuses with the time left; after the break one probe goes out, the rest are refused; a successful probe closes it")
    func halfOpenProbeCloses() {
        let c = Circuit(CircuitBreakerPolicy(minimumRequests: 1, breakDuration: .seconds(5)))
        c.attempts(1, failed: true, at: 0)
        #expect(c.admit(at: 2) == .rejected(retryIn: .seconds(3)))
        #expect(c.transition(at: 5) == .halfOpened)
        #expect(c.phase == .halfOpen(probesInFlight: 1, successes: 0))
        #expect(c.admit(at: 5) == .rejected(retryIn: .zero), "the probe is under way")
        #expect(c.record(probe: true, failed: false, at: 6) == .closed)
        #expect(c.phase == .closed)
        #expect(c.machine.hosts["h"]?.buckets.isEmpty == true, "closed with a fresh count")
        #expect(c.admit(at: 6) == .allowed(probe: false))
    }

    @Test("a failed probe opens the circuit again for a whole break")
    func failedProbeReopens() {
        let c = Circuit(CircuitBreakerPolicy(minimumRequests: 1, breakDuration: .seconds(5)))
        c.attempts(1, failed: true, at: 0)
        #expect(c.admit(at: 5) == .allowed(probe: true))
        #expect(c.record(probe: true, failed: true, at: 7) == .opened)
        #expect(c.admit(at: 8) == .rejected(retryIn: .seconds(4)))
    }

    @Test("several probes: all must succeed; an abandoned probe (its caller left) gives its place back and counts nothing")
    func probesAndAbandonment() {
        let c = Circuit(CircuitBreakerPolicy(minimumRequests: 1, breakDuration: .seconds(5), probes: 2))
        c.attempts(1, failed: true, at: 0)
        #expect(c.admit(at: 5) == .allowed(probe: true))
        #expect(c.admit(at: 5) == .allowed(probe: true))
        #expect(c.admit(at: 5) == .rejected(retryIn: .zero))
        c.machine.abandon(host: "h", probe: true)
        #expect(c.phase == .halfOpen(probesInFlight: 1, successes: 0))
        #expect(c.admit(at: 5) == .allowed(probe: true), "the abandoned probe's place")
        #expect(c.record(probe: true, failed: false, at: 6) == nil)
        #expect(c.record(probe: true, failed: false, at: 6) == .closed)
    }

    @Test("an outcome of an attempt admitted in another phase changes nothing; an abandoned attempt counts nothing")
    func staleOutcomes() {
        let c = Circuit(CircuitBreakerPolicy(minimumRequests: 2, breakDuration: .seconds(5)))
        #expect(c.admit(at: 0) == .allowed(probe: false))  // ends late, below
        c.attempts(2, failed: true, at: 0)
        #expect(c.phase == .open(until: .seconds(5)))
        #expect(c.record(failed: false, at: 1) == nil, "admitted while closed, ended while open")
        #expect(c.phase == .open(until: .seconds(5)))
        c.machine.abandon(host: "h", probe: false)
        #expect(c.phase == .open(until: .seconds(5)))
        #expect(c.admit(at: 5) == .allowed(probe: true))
        #expect(c.record(failed: true, at: 5) == nil, "a non-probe outcome does not judge a half-open circuit")
        #expect(c.phase == .halfOpen(probesInFlight: 1, successes: 0))
    }

    @Test("hosts have circuits of their own; idle hosts are forgotten when a new one arrives, open ones only after their break")
    func hostsAreBounded() {
        let c = Circuit(CircuitBreakerPolicy(minimumRequests: 1, window: .seconds(10), breakDuration: .seconds(60)))
        _ = c.admit("quiet", at: 0)
        c.attempts(1, failed: true, at: 0)  // "h" opens until 60
        #expect(c.admit("other", at: 1) == .allowed(probe: false), "another host's circuit is closed")
        #expect(c.machine.hosts.count == 3)
        _ = c.admit("new", at: 20)
        #expect(c.machine.hosts["quiet"] == nil && c.machine.hosts["other"] == nil, "closed and idle for a window: forgotten")
        #expect(c.machine.hosts["h"] != nil, "open: kept")
        _ = c.admit("newer", at: 70)
        #expect(c.machine.hosts["h"] == nil, "idle and its break over: forgotten")
    }
}
