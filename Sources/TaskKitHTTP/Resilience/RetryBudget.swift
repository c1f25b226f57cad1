/// How many retries a ``URLTaskManager`` may send to one host: its `retryBudget:` parameter.
///
/// Each host (its host and port, as for ``HostConcurrencyLimit``) counts, over the last
/// ``window``, the attempts sent to it (first attempts and retries alike) and the retries
/// granted. A retry is granted when fewer than ``minimumRetries`` retries were granted in the
/// window, or when one more stays within ``ratio`` of the attempts sent: over any window,
/// `retries ≤ max(minimumRetries, ratio × attempts)`. When the budget is spent, the failure that
/// asked for the retry (a retryable status, a `Retry-After`, a transport error) goes to the
/// caller unchanged, as if the retry policy had given up.
///
/// The budget applies to every retry an interceptor asks for (``URLTaskRetryDecision/retry`` and
/// ``URLTaskRetryDecision/retryAfter(_:)``), never to a ``URLTaskRetryDecision/replay`` (a
/// request sent again with a new token after a `401` is not the retry of a failure). An attempt
/// whose caller was cancelled while it was under way, and a retry whose caller was cancelled
/// while it waited for it, count nothing. A host not seen for a ``window`` is forgotten.
public struct RetryBudget: Sendable, Hashable {
    /// The share of the attempts sent in the ``window`` that retries may be, in `[0, 1]`.
    public let ratio: Double
    /// How far back attempts and retries are counted.
    public let window: Duration
    /// The retries granted in a ``window`` whatever the ratio, so that a quiet client can still
    /// retry. At least 0.
    public let minimumRetries: Int

    /// Creates a budget.
    ///
    /// - Parameters:
    ///   - ratio: The share of attempts that may be retries. Default: 0.2 (Envoy's
    ///     `budget_percent`, Finagle's `percentCanRetry`).
    ///   - window: How far back attempts and retries count. Default: 10 seconds.
    ///   - minimumRetries: The retries granted in a window whatever the ratio. Default: 3 (Envoy's
    ///     `min_retry_concurrency`).
    /// - Precondition: `ratio` in `[0, 1]`; `window` > 0; `minimumRetries` ≥ 0.
    public init(ratio: Double = 0.2, window: Duration = .seconds(10), minimumRetries: Int = 3) {
        // Each parameter is checked, naming it, where it is stored.
        precondition(ratio >= 0 && ratio <= 1, "RetryBudget: ratio must be in [0, 1], got \(ratio)")
        self.ratio = ratio
        precondition(window > .zero, "RetryBudget: window must be > 0, got \(window)")
        self.window = window
        precondition(minimumRetries >= 0, "RetryBudget: minimumRetries must be ≥ 0, got \(minimumRetries)")
        self.minimumRetries = minimumRetries
    }
}
