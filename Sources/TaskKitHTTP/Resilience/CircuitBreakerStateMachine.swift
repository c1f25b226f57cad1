/// The rules of ``CircuitBreakerPolicy``, as a pure value type (no lock, no clock: time is a
/// `Duration` since an origin the owner chooses).
///
/// Rules:
/// - A closed circuit admits every attempt and counts the outcomes in ten buckets spanning the
///   window; it opens when the window holds at least `minimumRequests` outcomes and the share of
///   failures reaches `failureRatio`, or after `consecutiveFailures` failures in a row.
/// - An open circuit refuses attempts until its break ends, saying how long is left; the first
///   attempt after that makes it half-open.
/// - A half-open circuit admits `probes` attempts (each marked as a probe) and refuses others
///   (nothing left to wait: `.zero`); a failed probe opens it again, and when every probe has
///   succeeded it closes with an empty count.
/// - An outcome reported for an attempt admitted in another phase (admitted while closed and
///   ending after the circuit opened) changes nothing. An attempt that is abandoned (its caller
///   cancelled) counts nothing; an abandoned probe gives its place back.
/// - A host whose circuit is closed, or open with its break over, and that saw no attempt for a
///   window, is forgotten when a new host arrives.
struct CircuitBreakerStateMachine {
    enum Phase: Equatable {
        case closed
        case open(until: Duration)
        case halfOpen(probesInFlight: Int, successes: Int)
    }

    struct Bucket {
        var start: Duration
        var total = 0
        var failures = 0
    }

    struct Host {
        var phase = Phase.closed
        var buckets: [Bucket] = []
        var consecutiveFailures = 0
        var lastSeen: Duration
    }

    enum Admission: Equatable {
        /// The attempt may go out; `probe`: it is one of a half-open circuit's probes.
        case allowed(probe: Bool)
        /// The circuit is open (or probing): fail at once; tried again in `retryIn`.
        case rejected(retryIn: Duration)
    }

    /// A change of a circuit's phase, for metrics and logs.
    enum Transition: Equatable {
        case opened, halfOpened, closed
    }

    let policy: CircuitBreakerPolicy
    private(set) var hosts: [String: Host] = [:]
    /// `policy.window / 10`, computed once (a `Duration` division is a 128-bit one).
    private let bucketWidth: Duration

    init(policy: CircuitBreakerPolicy) {
        self.policy = policy
        self.bucketWidth = policy.window / 10
    }

    // Each call hashes `host` once (`index(forKey:)`, or one insertion for a new host) and then
    // changes the host's state in place through its index.

    /// An attempt to `host` at `now` asks to go out; with the transition it caused, if any.
    mutating func admit(host: String, now: Duration) -> (Admission, Transition?) {
        let probes = policy.probes
        guard let index = hosts.index(forKey: host) else {
            // A new host: its circuit is closed.
            forgetIdleHosts(now: now)
            hosts[host] = Host(lastSeen: now)
            return (.allowed(probe: false), nil)
        }
        return Self.admit(&hosts.values[index], now: now, probes: probes)
    }

    private static func admit(_ host: inout Host, now: Duration, probes: Int) -> (Admission, Transition?) {
        host.lastSeen = now
        switch host.phase {
        case .closed:
            return (.allowed(probe: false), nil)
        case .open(let until) where now < until:
            return (.rejected(retryIn: until - now), nil)
        case .open:
            host.phase = .halfOpen(probesInFlight: 1, successes: 0)
            return (.allowed(probe: true), .halfOpened)
        case .halfOpen(let inFlight, let successes):
            guard inFlight + successes < probes else { return (.rejected(retryIn: .zero), nil) }
            host.phase = .halfOpen(probesInFlight: inFlight + 1, successes: successes)
            return (.allowed(probe: true), nil)
        }
    }

    /// An attempt admitted as `probe` ended at `now`, `failed` or not; the transition it caused.
    mutating func record(host: String, probe: Bool, failed: Bool, now: Duration) -> Transition? {
        guard let index = hosts.index(forKey: host) else { return nil }
        let policy = self.policy
        let bucketWidth = self.bucketWidth
        return Self.record(&hosts.values[index], probe: probe, failed: failed, now: now, policy: policy, bucketWidth: bucketWidth)
    }

    private static func record(
        _ host: inout Host, probe: Bool, failed: Bool, now: Duration, policy: CircuitBreakerPolicy, bucketWidth: Duration
    ) -> Transition? {
        switch host.phase {
        case .halfOpen(let inFlight, let successes) where probe:
            if failed {
                open(&host, now: now, policy: policy)
                return .opened
            }
            guard successes + 1 >= policy.probes else {
                host.phase = .halfOpen(probesInFlight: inFlight - 1, successes: successes + 1)
                return nil
            }
            host = Host(lastSeen: now)
            return .closed
        case .closed where !probe:
            count(&host, failed: failed, now: now, window: policy.window, bucketWidth: bucketWidth)
            guard tripped(host, policy: policy) else { return nil }
            open(&host, now: now, policy: policy)
            return .opened
        default:
            return nil  // admitted in another phase: it says nothing about this one
        }
    }

    /// An attempt admitted as `probe` ended without an outcome that counts (its caller left).
    mutating func abandon(host: String, probe: Bool) {
        guard probe, let index = hosts.index(forKey: host),
            case .halfOpen(let inFlight, let successes) = hosts.values[index].phase
        else { return }
        hosts.values[index].phase = .halfOpen(probesInFlight: inFlight - 1, successes: successes)
    }

    private static func open(_ host: inout Host, now: Duration, policy: CircuitBreakerPolicy) {
        host.phase = .open(until: now + policy.breakDuration)
        host.buckets = []
        host.consecutiveFailures = 0
    }

    private static func count(_ host: inout Host, failed: Bool, now: Duration, window: Duration, bucketWidth: Duration) {
        // Buckets are appended in order of their start (a new one starts at least a width after
        // the last), so the ones out of the window are a prefix: when the first is in, all are.
        if let first = host.buckets.first, first.start + window <= now {
            host.buckets.removeAll { $0.start + window <= now }
        }
        let last = host.buckets.count - 1
        if last >= 0, now < host.buckets[last].start + bucketWidth {
            host.buckets[last].total += 1
            if failed { host.buckets[last].failures += 1 }
        } else {
            host.buckets.append(Bucket(start: now, total: 1, failures: failed ? 1 : 0))
        }
        host.consecutiveFailures = failed ? host.consecutiveFailures + 1 : 0
    }

    private static func tripped(_ host: Host, policy: CircuitBreakerPolicy) -> Bool {
        if let limit = policy.consecutiveFailures, host.consecutiveFailures >= limit { return true }
        var total = 0
        var failures = 0
        for bucket in host.buckets {
            total += bucket.total
            failures += bucket.failures
        }
        return total >= policy.minimumRequests && Double(failures) >= policy.failureRatio * Double(total)
    }

    private mutating func forgetIdleHosts(now: Duration) {
        let window = policy.window
        hosts = hosts.filter { _, host in
            guard host.lastSeen + window <= now else { return true }
            switch host.phase {
            case .closed: return false
            case .open(let until): return now < until
            case .halfOpen: return true
            }
        }
    }
}
