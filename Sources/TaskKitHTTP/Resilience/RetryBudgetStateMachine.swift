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
    /// `budget.window / 10`, computed once (a `Duration` division is a 128-bit one).
    private let bucketWidth: Duration

    init(budget: RetryBudget) {
        self.budget = budget
        self.bucketWidth = budget.window / 10
    }

    // Each call hashes `host` once (`index(forKey:)`, or one insertion for a new host) and then
    // changes the host's state in place through its index.

    /// An attempt to `host` is sent at `now`.
    mutating func attemptSent(host: String, now: Duration) {
        let index = touch(host, now: now)
        let (window, bucketWidth) = (budget.window, self.bucketWidth)
        Self.count(.attempt, in: &hosts.values[index], now: now, window: window, bucketWidth: bucketWidth)
    }

    /// An attempt to `host` failed at `now` and an interceptor asks for a retry: whether the
    /// budget grants it (and counts it).
    mutating func grantRetry(host: String, now: Duration) -> Bool {
        let index = touch(host, now: now)
        let (attempts, retries) = Self.totals(of: hosts.values[index].buckets)
        guard retries < budget.minimumRetries || Double(retries + 1) <= budget.ratio * Double(attempts) else { return false }
        let (window, bucketWidth) = (budget.window, self.bucketWidth)
        Self.count(.retry, in: &hosts.values[index], now: now, window: window, bucketWidth: bucketWidth)
        return true
    }

    /// Takes back a `kind` counted for `host` at `countedAt` (its caller was cancelled).
    mutating func takeBack(_ kind: Kind, host: String, countedAt: Duration) {
        guard let index = hosts.index(forKey: host),
            let bucket = hosts.values[index].buckets.lastIndex(where: { $0.start <= countedAt })
        else { return }
        switch kind {
        case .attempt: hosts.values[index].buckets[bucket].attempts = max(0, hosts.values[index].buckets[bucket].attempts - 1)
        case .retry: hosts.values[index].buckets[bucket].retries = max(0, hosts.values[index].buckets[bucket].retries - 1)
        }
    }

    /// The attempts and retries of `host` in its window (as last rolled).
    func totals(of host: String) -> (attempts: Int, retries: Int) {
        Self.totals(of: hosts[host]?.buckets ?? [])
    }

    private static func totals(of buckets: [Bucket]) -> (attempts: Int, retries: Int) {
        var attempts = 0
        var retries = 0
        for bucket in buckets {
            attempts += bucket.attempts
            retries += bucket.retries
        }
        return (attempts, retries)
    }

    private static func count(_ kind: Kind, in host: inout Host, now: Duration, window: Duration, bucketWidth: Duration) {
        // `touch` rolled the window at `now`.
        let last = host.buckets.count - 1
        if last >= 0, now < host.buckets[last].start + bucketWidth {
            switch kind {
            case .attempt: host.buckets[last].attempts += 1
            case .retry: host.buckets[last].retries += 1
            }
        } else {
            host.buckets.append(Bucket(start: now, attempts: kind == .attempt ? 1 : 0, retries: kind == .retry ? 1 : 0))
        }
    }

    /// Makes `host` known (forgetting idle hosts first when it is new), rolls its window; the
    /// host's index.
    private mutating func touch(_ host: String, now: Duration) -> Dictionary<String, Host>.Index {
        let window = budget.window
        guard let index = hosts.index(forKey: host) else {
            // A new host: nothing to roll.
            hosts = hosts.filter { $0.value.lastSeen + window > now }
            hosts[host] = Host(lastSeen: now)
            return hosts.index(forKey: host)!
        }
        Self.roll(&hosts.values[index], now: now, window: window)
        return index
    }

    private static func roll(_ host: inout Host, now: Duration, window: Duration) {
        host.lastSeen = now
        // Buckets are appended in order of their start (a new one starts at least a width after
        // the last), so the ones out of the window are a prefix: when the first is in, all are.
        if let first = host.buckets.first, first.start + window <= now {
            host.buckets.removeAll { $0.start + window <= now }
        }
    }
}
