import CoreMetrics
import TaskKit

/// The retry budgets of one ``URLTaskManager`` with `retryBudget:`: a
/// ``RetryBudgetStateMachine`` under one lock, its time read from the manager's clock as the
/// duration since the ledger was made. Metrics are recorded after unlocking.
final class RetryBudgetLedger: Sendable {
    let budget: RetryBudget
    private let state: LockedState<RetryBudgetStateMachine>
    private let elapsed: @Sendable () -> Duration
    /// `taskkit_http_retry_budget_exhausted`: retries refused because the budget was spent.
    private let exhausted: Counter?

    init(budget: RetryBudget, clock: any Clock<Duration>, metricsLabel: String?) {
        self.budget = budget
        self.state = LockedState(RetryBudgetStateMachine(budget: budget))
        self.elapsed = startStopwatch(on: clock)
        self.exhausted = metricsLabel.map { Counter(label: "taskkit_http_retry_budget_exhausted", dimensions: [("name", $0)]) }
    }

    /// The attempts and retries of `host` in its window (for tests).
    func totals(of host: String) -> (attempts: Int, retries: Int) { state.withLock { $0.totals(of: host) } }

    /// The number of hosts tracked (for tests).
    var hostCount: Int { state.withLock { $0.hosts.count } }

    /// An attempt to `host` is about to be sent; returns when it was counted (to take it back).
    func attemptSent(host: String) -> Duration {
        let now = elapsed()
        state.withLock { $0.attemptSent(host: host, now: now) }
        return now
    }

    /// Asks for a retry to `host`; returns when it was counted, or `nil` when the budget is spent.
    func grantRetry(host: String) -> Duration? {
        let now = elapsed()
        let granted = state.withLock { $0.grantRetry(host: host, now: now) }
        guard granted else {
            exhausted?.increment()
            return nil
        }
        return now
    }

    /// Takes back a `kind` counted for `host` at `countedAt`: its caller was cancelled.
    func takeBack(_ kind: RetryBudgetStateMachine.Kind, host: String, countedAt: Duration) {
        state.withLock { $0.takeBack(kind, host: host, countedAt: countedAt) }
    }
}
