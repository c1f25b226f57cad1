import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// When a ``URLTaskManager`` sends a second copy of a slow request: its `hedging:` parameter.
///
/// An attempt of an eligible request that has no response after ``delay`` gets a hedge: the same
/// request (as the interceptors adapted it) sent again, while the first is still under way. The
/// first response (any status) wins and goes to the caller at once; the other copies are
/// cancelled without the caller waiting for them, and their outcomes count nowhere (the circuit
/// breaker forgets them). A copy that fails without a response while
/// another is still under way is set aside; when every copy has failed, the caller gets the last
/// failure, and the retry interceptors decide what follows, as for any attempt.
///
/// - **Only requests that may be sent twice:** an idempotent method (`GET`, `HEAD`, `OPTIONS`,
///   `TRACE`, `PUT`, `DELETE`), or a request carrying an `Idempotency-Key` header (the caller's
///   statement that the server deduplicates it). A `POST` or `PATCH` without one is never hedged.
/// - **Hedges spend the retry budget:** with a ``RetryBudget``, each hedge is a retry granted by
///   the host's budget; when it is spent, no hedge is sent and the first copy goes on alone.
/// - **Each copy meets the guards:** a hedge asks the host's circuit, takes a token of its rate
///   limit and a slot of its concurrency limit, like any attempt; one refused there is set
///   aside, and the first copy goes on.
///
/// Hedging trades requests for tail latency: against a host whose slowest answers come from a
/// few slow replicas or a congested path, a hedge sent at about the 95th percentile cuts the
/// tail at the cost of a few percent more requests. It does not help a host that is slow for
/// everyone, where it only adds load: keep the retry budget on.
public struct HedgingPolicy: Sendable, Hashable {
    /// How long an attempt waits for a response before a hedge is sent (and between hedges).
    /// More than 0.
    public let delay: Duration
    /// The most hedges per attempt. At least 1.
    public let maximumHedges: Int

    /// Creates a policy.
    ///
    /// - Parameters:
    ///   - delay: The wait for a response before each hedge; a good value is about the 95th
    ///     percentile of the host's latency.
    ///   - maximumHedges: The most hedges per attempt. Default: 1.
    /// - Precondition: `delay` > 0; `maximumHedges` ≥ 1.
    public init(delay: Duration, maximumHedges: Int = 1) {
        // Each parameter is checked, naming it, where it is stored.
        precondition(delay > .zero, "HedgingPolicy: delay must be > 0, got \(delay)")
        self.delay = delay
        precondition(maximumHedges >= 1, "HedgingPolicy: maximumHedges must be ≥ 1, got \(maximumHedges)")
        self.maximumHedges = maximumHedges
    }

    /// Whether `request` may be hedged: an idempotent method, or an `Idempotency-Key` header.
    public static func isEligible(_ request: URLRequest) -> Bool {
        request.hasIdempotentMethod || request.value(forHTTPHeaderField: "Idempotency-Key") != nil
    }
}
