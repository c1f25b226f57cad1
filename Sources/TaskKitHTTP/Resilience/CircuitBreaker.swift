import CoreMetrics
import Foundation
import Logging
import TaskKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The circuits of one ``URLTaskManager`` with `circuitBreaker:`: a
/// ``CircuitBreakerStateMachine`` under one lock, its time read from the manager's clock as the
/// duration since the breaker was made. Metrics and logs are recorded after unlocking.
final class CircuitBreaker: Sendable {
    let policy: CircuitBreakerPolicy
    private let state: LockedState<CircuitBreakerStateMachine>
    private let elapsed: @Sendable () -> Duration
    private let logger: Logger
    /// `taskkit_http_circuit_transitions` by `state` (`open`, `half_open`, `closed`), with a
    /// `metricsLabel`.
    private let transitions: [CircuitBreakerStateMachine.Transition: Counter]?
    /// `taskkit_http_circuit_rejections`: attempts refused by an open circuit.
    private let rejections: Counter?

    init(policy: CircuitBreakerPolicy, clock: any Clock<Duration>, logger: Logger, metricsLabel: String?) {
        self.policy = policy
        self.state = LockedState(CircuitBreakerStateMachine(policy: policy))
        self.elapsed = startStopwatch(on: clock)
        self.logger = logger
        self.transitions = metricsLabel.map { label in
            [.opened: "open", .halfOpened: "half_open", .closed: "closed"].mapValues {
                Counter(label: "taskkit_http_circuit_transitions", dimensions: [("name", label), ("state", $0)])
            }
        }
        self.rejections = metricsLabel.map { Counter(label: "taskkit_http_circuit_rejections", dimensions: [("name", $0)]) }
    }

    /// The phase of `host`'s circuit (for tests); `nil` when the host is not tracked.
    func phase(of host: String) -> CircuitBreakerStateMachine.Phase? { state.withLock { $0.hosts[host]?.phase } }

    /// Asks whether an attempt to `host` may go out; returns whether it is a probe.
    ///
    /// - Throws: ``URLTaskError/circuitOpen(host:retryIn:)`` when the circuit refuses it.
    func admit(host: String) throws -> Bool {
        let now = elapsed()
        let (admission, transition) = state.withLock { $0.admit(host: host, now: now) }
        report(transition, host: host)
        switch admission {
        case .allowed(let probe):
            return probe
        case .rejected(let retryIn):
            rejections?.increment()
            throw URLTaskError.circuitOpen(host: host, retryIn: retryIn)
        }
    }

    /// An admitted attempt to `host` ended with `outcome`; `cancelled`: its caller left (it
    /// counts nothing).
    func record(host: String, probe: Bool, outcome: Result<URLTaskResponse, any Error>, cancelled: Bool) {
        if cancelled {
            state.withLock { $0.abandon(host: host, probe: probe) }
            return
        }
        // The policy's test is user code: it runs before the lock is taken.
        let failed = policy.isFailure(outcome.map(\.response))
        let now = elapsed()
        let transition = state.withLock { $0.record(host: host, probe: probe, failed: failed, now: now) }
        report(transition, host: host)
    }

    private func report(_ transition: CircuitBreakerStateMachine.Transition?, host: String) {
        guard let transition else { return }
        transitions?[transition]?.increment()
        logger.debug("circuit", metadata: ["event": "circuit", "host": .string(host), "state": .string("\(transition)")])
    }
}
