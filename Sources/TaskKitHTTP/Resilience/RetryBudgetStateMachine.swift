/// The rules of ``RetryBudget``, as a pure value type (no lock, no clock: time is a `Duration`
/// since an origin the owner chooses).
///
/// Rules:
/// - Each host counts attempts sent and retries granted in ten buckets spanning the window; a
///   bucket older than the window is dropped.
/// - A retry is granted when the window holds fewer than `minimumRetries` retries, or when one
///   more stays within `ratio` of the attempts; a granted retry is counted at once (so that
///   concurrent failures cannot all pass the same check), a refused one counts nothing.
/// - An attempt or a retry can be taken back (its caller was cancelled): the bucket it was counted
///   in loses one, if it is still in the window.
/// - A host that saw nothing for a window is forgotten when a new host arrives.
struct RetryBudgetStateMachine {
    struct Bucket: Equatable {
        var start: Duration
        var attempts = 0
        var retries = 0
    }

    struct Host {
        var buckets: [Bucket] = []
        var lastSeen: Duration
    }

    /// What is counted.
    enum Kind {
        case attempt, retry
    }

    let budget: RetryBudget
    private(set) var hosts: [String: Host] = [:]

    init(budget: RetryBudget) {
        self.budget = budget
    }

    /// An attempt to `host` is sent at `now`.
    mutating func attemptSent(host: String, now: Duration) {
        count(.attempt, host: host, now: now)
    }

    /// An attempt to `host` failed at `now` and an interceptor asks for a retry: whether the
    /// budget grants it (and counts it).
    mutating func grantRetry(host: String, now: Duration) -> Bool {
        touch(host, now: now)
        let (attempts, retries) = totals(of: host)
        guard retries < budget.minimumRetries || Double(retries + 1) <= budget.ratio * Double(attempts) else { return false }
        count(.retry, host: host, now: now)
        return true
    }

    /// Takes back a `kind` counted for `host` at `countedAt` (its caller was cancelled).
    mutating func takeBack(_ kind: Kind, host: String, countedAt: Duration) {
        guard let index = hosts[host]?.buckets.lastIndex(where: { $0.start <= countedAt }) else { return }
        switch kind {
        case .attempt: hosts[host]!.buckets[index].attempts = max(0, hosts[host]!.buckets[index].attempts - 1)
        case .retry: hosts[host]!.buckets[index].retries = max(0, hosts[host]!.buckets[index].retries - 1)
        }
    }

    /// The attempts and retries of `host` in its window (as last rolled).
    func totals(of host: String) -> (attempts: Int, retries: Int) {
        let buckets = hosts[host]?.buckets ?? []
        return (buckets.reduce(0) { $0 + $1.attempts }, buckets.reduce(0) { $0 + $1.retries })
    }

    private mutating func count(_ kind: Kind, host: String, now: Duration) {
        touch(host, now: now)
        let width = budget.window / 10
        if let last = hosts[host]!.buckets.last, now < last.start + width {
            let index = hosts[host]!.buckets.count - 1
            switch kind {
            case .attempt: hosts[host]!.buckets[index].attempts += 1
            case .retry: hosts[host]!.buckets[index].retries += 1
            }
        } else {
            hosts[host]!.buckets.append(Bucket(start: now, attempts: kind == .attempt ? 1 : 0, retries: kind == .retry ? 1 : 0))
        }
    }

    /// Makes `host` known (forgetting idle hosts first when it is new), rolls its window.
    private mutating func touch(_ host: String, now: Duration) {
        if hosts[host] == nil {
            hosts = hosts.filter { $0.value.lastSeen + budget.window > now }
            hosts[host] = Host(lastSeen: now)
        }
        hosts[host]!.lastSeen = now
        hosts[host]!.buckets.removeAll { $0.start + budget.window <= now }
    }
}
