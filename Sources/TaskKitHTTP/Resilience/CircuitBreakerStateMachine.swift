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

    init(policy: CircuitBreakerPolicy) {
        self.policy = policy
    }

    /// An attempt to `host` at `now` asks to go out; with the transition it caused, if any.
    mutating func admit(host: String, now: Duration) -> (Admission, Transition?) {
        if hosts[host] == nil {
            forgetIdleHosts(now: now)
            hosts[host] = Host(lastSeen: now)
        }
        hosts[host]!.lastSeen = now
        switch hosts[host]!.phase {
        case .closed:
            return (.allowed(probe: false), nil)
        case .open(let until) where now < until:
            return (.rejected(retryIn: until - now), nil)
        case .open:
            hosts[host]!.phase = .halfOpen(probesInFlight: 1, successes: 0)
            return (.allowed(probe: true), .halfOpened)
        case .halfOpen(let inFlight, let successes):
            guard inFlight + successes < policy.probes else { return (.rejected(retryIn: .zero), nil) }
            hosts[host]!.phase = .halfOpen(probesInFlight: inFlight + 1, successes: successes)
            return (.allowed(probe: true), nil)
        }
    }

    /// An attempt admitted as `probe` ended at `now`, `failed` or not; the transition it caused.
    mutating func record(host: String, probe: Bool, failed: Bool, now: Duration) -> Transition? {
        guard let current = hosts[host] else { return nil }
        switch current.phase {
        case .halfOpen(let inFlight, let successes) where probe:
            if failed {
                open(host, now: now)
                return .opened
            }
            guard successes + 1 >= policy.probes else {
                hosts[host]!.phase = .halfOpen(probesInFlight: inFlight - 1, successes: successes + 1)
                return nil
            }
            hosts[host] = Host(lastSeen: now)
            return .closed
        case .closed where !probe:
            count(host, failed: failed, now: now)
            guard tripped(hosts[host]!) else { return nil }
            open(host, now: now)
            return .opened
        default:
            return nil  // admitted in another phase: it says nothing about this one
        }
    }

    /// An attempt admitted as `probe` ended without an outcome that counts (its caller left).
    mutating func abandon(host: String, probe: Bool) {
        guard probe, case .halfOpen(let inFlight, let successes)? = hosts[host]?.phase else { return }
        hosts[host]!.phase = .halfOpen(probesInFlight: inFlight - 1, successes: successes)
    }

    private mutating func open(_ host: String, now: Duration) {
        hosts[host]!.phase = .open(until: now + policy.breakDuration)
        hosts[host]!.buckets = []
        hosts[host]!.consecutiveFailures = 0
    }

    private mutating func count(_ host: String, failed: Bool, now: Duration) {
        let width = policy.window / 10
        hosts[host]!.buckets.removeAll { $0.start + policy.window <= now }
        if let last = hosts[host]!.buckets.last, now < last.start + width {
            hosts[host]!.buckets[hosts[host]!.buckets.count - 1].total += 1
            if failed { hosts[host]!.buckets[hosts[host]!.buckets.count - 1].failures += 1 }
        } else {
            hosts[host]!.buckets.append(Bucket(start: now, total: 1, failures: failed ? 1 : 0))
        }
        hosts[host]!.consecutiveFailures = failed ? hosts[host]!.consecutiveFailures + 1 : 0
    }

    private func tripped(_ host: Host) -> Bool {
        if let limit = policy.consecutiveFailures, host.consecutiveFailures >= limit { return true }
        let total = host.buckets.reduce(0) { $0 + $1.total }
        let failures = host.buckets.reduce(0) { $0 + $1.failures }
        return total >= policy.minimumRequests && Double(failures) >= policy.failureRatio * Double(total)
    }

    private mutating func forgetIdleHosts(now: Duration) {
        hosts = hosts.filter { _, host in
            guard host.lastSeen + policy.window <= now else { return true }
            switch host.phase {
            case .closed: return false
            case .open(let until): return now < until
            case .halfOpen: return true
            }
        }
    }
}
