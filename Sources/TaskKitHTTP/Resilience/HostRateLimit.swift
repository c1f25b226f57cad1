/// How fast a ``URLTaskManager`` sends to one host: its `rateLimit:` parameter, a token bucket
/// per host.
///
/// Each host (its host and port, as for ``HostConcurrencyLimit``) has a bucket that holds at most
/// ``burst`` tokens and gains ``requestsPerSecond`` tokens a second. Every attempt (a first
/// attempt, a retry, a hedge) takes a token just before it goes out; when the bucket is empty it
/// waits for the next token, in the order the attempts arrived. Over any interval of `t`
/// seconds, at most `burst + requestsPerSecond × t` attempts go to one host.
/// - A waiting attempt keeps its request's deadline: when it passes, the request fails with
///   `TaskError.timedOut`; a cancelled caller leaves at once (its token goes back when nobody
///   took a later one).
/// - An attempt whose token would come later than ``maximumWait`` fails at once with
///   ``URLTaskError/rateLimited(host:retryIn:)``, without reaching the network.
/// - **A host that asks for a pause gets one.** A `429` or `503` response with a `Retry-After`
///   header pauses the host's whole bucket for that long (at most ``maximumPause``): every
///   attempt to the host waits, the ones already waiting included, not only the request that got
///   the answer. The bucket restarts empty, one token at the end of the pause and then one every
///   `1 / requestsPerSecond` seconds, so a recovering host is not met by a burst.
///
/// Coalesced callers that join a flight take no token: only the flight's attempts do. A host
/// whose bucket is full again and that is not paused is forgotten, so state is kept only for
/// hosts sent to recently.
public struct HostRateLimit: Sendable, Hashable {
    /// The tokens a host's bucket gains each second. At least one a day (`1 / 86_400`).
    public let requestsPerSecond: Double
    /// The most tokens a host's bucket holds: how many attempts may go out at once after a quiet
    /// spell. At least 1.
    public let burst: Int
    /// The longest an attempt waits for a token; one that would wait longer fails at once. More
    /// than 0.
    public let maximumWait: Duration
    /// The longest pause a `Retry-After` can impose on a host; a longer one is cut to this. At
    /// least 0 (`.zero`: `Retry-After` pauses nothing).
    public let maximumPause: Duration

    /// Creates a limit.
    ///
    /// - Parameters:
    ///   - requestsPerSecond: The steady rate to one host.
    ///   - burst: The bucket's size. Default: 1 (no burst: an even pace).
    ///   - maximumWait: The longest wait for a token. Default: 30 seconds.
    ///   - maximumPause: The longest pause a `Retry-After` imposes. Default: 60 seconds.
    /// - Precondition: `requestsPerSecond` finite and ≥ `1 / 86_400`; `burst` ≥ 1; `maximumWait` > 0;
    ///   `maximumPause` ≥ 0.
    public init(requestsPerSecond: Double, burst: Int = 1, maximumWait: Duration = .seconds(30), maximumPause: Duration = .seconds(60)) {
        // Each parameter is checked, naming it, where it is stored.
        precondition(
            requestsPerSecond >= 1.0 / 86_400 && requestsPerSecond.isFinite,
            "HostRateLimit: requestsPerSecond must be finite and at least one a day (1 / 86_400), got \(requestsPerSecond)"
        )
        self.requestsPerSecond = requestsPerSecond
        precondition(burst >= 1, "HostRateLimit: burst must be ≥ 1, got \(burst)")
        self.burst = burst
        precondition(maximumWait > .zero, "HostRateLimit: maximumWait must be > 0, got \(maximumWait)")
        self.maximumWait = maximumWait
        precondition(maximumPause >= .zero, "HostRateLimit: maximumPause must be ≥ 0, got \(maximumPause)")
        self.maximumPause = maximumPause
    }

    /// The time between two tokens.
    var interval: Duration { .seconds(1 / requestsPerSecond) }
}
