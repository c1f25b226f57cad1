import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// When a ``URLTaskManager`` stops sending to a failing host for a while: its `circuitBreaker:`
/// parameter.
///
/// Each host (its host and port, as for ``HostConcurrencyLimit``) has a circuit:
/// - **Closed** (the start): attempts go out, and their outcomes are counted over the last
///   ``window``. When at least ``minimumRequests`` attempts ended in it and the share of
///   failures reaches ``failureRatio`` — or, with ``consecutiveFailures``, that many attempts in
///   a row failed — the circuit opens.
/// - **Open** for ``breakDuration``: every attempt to the host fails at once with
///   ``URLTaskError/circuitOpen(host:retryIn:)``, which says how long until the circuit is tried
///   again, without reaching the network or the retry interceptors.
/// - **Half-open** once the break has passed: ``probes`` attempts go out, one after another
///   arriving; the others fail at once (`retryIn` zero) while they are under way. When every
///   probe succeeds the circuit closes, with a fresh count; a failed probe opens it again.
///
/// What counts as a failure is ``isFailure`` (default: an error without a response, a `5xx`
/// status, or a `429` with `Retry-After`). A caller's own cancellation, and a deadline that
/// ended the attempt, never count: the attempt is forgotten (a probe's place is given back). A host not seen for a ``window`` whose
/// circuit is closed (or whose break is over) is forgotten.
public struct CircuitBreakerPolicy: Sendable {
    /// The share of failed attempts in the ``window`` that opens the circuit, in `(0, 1]`.
    public let failureRatio: Double
    /// The fewest attempts in the ``window`` before the ratio is judged. At least 1.
    public let minimumRequests: Int
    /// How far back attempts are counted.
    public let window: Duration
    /// With a count, that many failed attempts in a row also open the circuit; `nil` for none.
    public let consecutiveFailures: Int?
    /// How long an open circuit refuses attempts.
    public let breakDuration: Duration
    /// How many attempts a half-open circuit lets through; all must succeed to close it. At
    /// least 1.
    public let probes: Int
    /// Whether an attempt's outcome is a failure.
    public let isFailure: @Sendable (Result<HTTPURLResponse, any Error>) -> Bool

    /// The default failure test: an error (no response), a `5xx` status, or a `429` with a
    /// `Retry-After` header (the host asked for a pause; with a ``HostRateLimit`` it pauses the
    /// host's bucket). A `429` without one is an answer about this client's rate, not the host's
    /// health, and does not count.
    public static let defaultIsFailure: @Sendable (Result<HTTPURLResponse, any Error>) -> Bool = { outcome in
        switch outcome {
        case .success(let response):
            response.statusCode >= 500
                || (response.statusCode == 429 && response.value(forHTTPHeaderField: "Retry-After") != nil)
        case .failure: true
        }
    }

    /// Creates a policy.
    ///
    /// - Parameters:
    ///   - failureRatio: The share of failures that opens the circuit. Default: 0.5.
    ///   - minimumRequests: The fewest attempts in the window before it is judged. Default: 10.
    ///   - window: How far back attempts count. Default: 30 seconds.
    ///   - consecutiveFailures: Failures in a row that also open it; `nil` (default) for none.
    ///   - breakDuration: How long it stays open. Default: 5 seconds.
    ///   - probes: The attempts a half-open circuit lets through. Default: 1.
    ///   - isFailure: Which outcomes count as failures. Default: ``defaultIsFailure``.
    /// - Precondition: `failureRatio` in `(0, 1]`; `minimumRequests`, `probes` and
    ///   `consecutiveFailures` (when given) ≥ 1; `window` and `breakDuration` > 0.
    public init(
        failureRatio: Double = 0.5,
        minimumRequests: Int = 10,
        window: Duration = .seconds(30),
        consecutiveFailures: Int? = nil,
        breakDuration: Duration = .seconds(5),
        probes: Int = 1,
        isFailure: @escaping @Sendable (Result<HTTPURLResponse, any Error>) -> Bool = CircuitBreakerPolicy.defaultIsFailure
    ) {
        // Each parameter is checked, naming it, where it is stored.
        precondition(failureRatio > 0 && failureRatio <= 1, "CircuitBreakerPolicy: failureRatio must be in (0, 1], got \(failureRatio)")
        self.failureRatio = failureRatio
        precondition(minimumRequests >= 1, "CircuitBreakerPolicy: minimumRequests must be ≥ 1, got \(minimumRequests)")
        self.minimumRequests = minimumRequests
        precondition(window > .zero, "CircuitBreakerPolicy: window must be > 0, got \(window)")
        self.window = window
        if let consecutiveFailures {
            precondition(consecutiveFailures >= 1, "CircuitBreakerPolicy: consecutiveFailures must be ≥ 1, got \(consecutiveFailures)")
        }
        self.consecutiveFailures = consecutiveFailures
        precondition(breakDuration > .zero, "CircuitBreakerPolicy: breakDuration must be > 0, got \(breakDuration)")
        self.breakDuration = breakDuration
        precondition(probes >= 1, "CircuitBreakerPolicy: probes must be ≥ 1, got \(probes)")
        self.probes = probes
        self.isFailure = isFailure
    }
}
