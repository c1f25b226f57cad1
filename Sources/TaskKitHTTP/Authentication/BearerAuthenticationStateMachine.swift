/// The rules of bearer-token authentication, as a pure value type (no locks, no tasks, no clock).
///
/// Time is a `Duration` offset on the owner's clock. A waiter is an opaque value (a continuation
/// in production, anything in tests) that the machine hands back in its actions for the owner to
/// resume after unlocking.
///
/// Rules:
/// - A request needs a credential. With a credential that is not about to expire and no refresh
///   running, it gets it at once. "About to expire" means within `leeway`, or within half the
///   credential's lifetime when that is shorter: a credential is always used for at least the
///   first half of its life, so a lifetime shorter than `leeway` does not make it stale at birth.
/// - Otherwise it waits. The first waiter starts the (one) refresh; later ones join it.
/// - A 401 for a request signed with token `t`: if the current credential's token is not `t` (a
///   newer credential exists), the request is replayed with it without a refresh; if a refresh runs, it waits for it; otherwise it starts one.
/// - Starting a refresh when `maximumRefreshes` already started within `window` fails that waiter
///   with ``AuthenticationError/refreshLoopDetected(limit:window:)``.
/// - A refresh's success resumes every waiter with the new credential; its failure resumes every
///   waiter with ``AuthenticationError/refreshFailed(underlying:)`` and keeps the old credential.
/// - A cancelled waiter is removed and handed back; the refresh goes on for the others. When the
///   last waiter leaves, the refresh is abandoned (``Action``'s owner cancels it): its result,
///   whenever it comes, is ignored, and the next request that needs a credential starts a new one.
///   Each refresh has an id, so a late result of an abandoned refresh never ends a newer one.
struct BearerAuthenticationStateMachine<Waiter> {
    /// A credential with its expiry and generation (1 for the first, +1 per refresh).
    struct Issued: Equatable {
        var credential: BearerCredential
        var expiresAt: Duration?
        /// When the credential stops being used: `expiresAt` less the leeway (see the rules).
        var staleAt: Duration?
        var generation: UInt64
    }

    enum Action {
        /// Use this credential (resume the waiter, if one was passed, with it).
        case use(Issued)
        /// The waiter was enqueued behind a running refresh; nothing to do.
        case wait
        /// The waiter was enqueued; start refresh `refresh` from `current`.
        case startRefresh(current: BearerCredential?, refresh: UInt64)
        /// Fail with this error (the waiter was not enqueued).
        case fail(AuthenticationError)
    }

    let leeway: Duration
    let maximumRefreshes: Int
    let window: Duration

    private(set) var issued: Issued?
    /// The id of the running refresh, `nil` when none runs.
    private(set) var refreshing: UInt64?
    var isRefreshing: Bool { refreshing != nil }
    private(set) var waiters: [(id: UInt64, waiter: Waiter)] = []
    private(set) var refreshStarts: [Duration] = []
    private var nextGeneration: UInt64 = 1
    private var nextRefresh: UInt64 = 1

    init(initial: BearerCredential?, now: Duration, leeway: Duration, maximumRefreshes: Int, window: Duration) {
        self.leeway = leeway
        self.maximumRefreshes = maximumRefreshes
        self.window = window
        if let initial { store(initial, now: now) }
    }

    /// The credential to sign with right now, if no waiting is needed (fast path, no waiter).
    func usableCredential(now: Duration) -> Issued? {
        guard !isRefreshing, let issued, isFresh(issued, now: now) else { return nil }
        return issued
    }

    /// A request needs a credential; `waiter` is enqueued when it must wait.
    mutating func credential(id: UInt64, waiter: Waiter, now: Duration) -> Action {
        if let usable = usableCredential(now: now) { return .use(usable) }
        return enqueue(id: id, waiter: waiter, now: now)
    }

    /// A request signed with `token` (nil: unsigned) got 401.
    mutating func unauthorized(signedWith token: String?, id: UInt64, waiter: Waiter, now: Duration) -> Action {
        if !isRefreshing, let issued, issued.credential.accessToken != token, isFresh(issued, now: now) {
            return .use(issued)  // a newer credential already exists: replay with it
        }
        return enqueue(id: id, waiter: waiter, now: now)
    }

    /// Refresh `refresh` produced `credential`: returns the waiters to resume with the new
    /// credential; `nil` when that refresh was abandoned (nothing changes).
    mutating func refreshSucceeded(_ credential: BearerCredential, refresh: UInt64, now: Duration) -> (Issued, [Waiter])? {
        guard refreshing == refresh else { return nil }
        refreshing = nil
        store(credential, now: now)
        return (issued!, takeWaiters())
    }

    /// Refresh `refresh` failed: returns the waiters to fail; `nil` when that refresh was
    /// abandoned (nothing changes).
    mutating func refreshFailed(refresh: UInt64) -> [Waiter]? {
        guard refreshing == refresh else { return nil }
        refreshing = nil
        return takeWaiters()
    }

    /// Removes a waiter whose task was cancelled: the waiter (`nil` if it was already resumed),
    /// and the id of the refresh to cancel when it was the last waiter of one (`nil` otherwise).
    mutating func cancel(id: UInt64) -> (waiter: Waiter?, abandoned: UInt64?) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return (nil, nil) }
        let waiter = waiters.remove(at: index).waiter
        guard waiters.isEmpty, let refresh = refreshing else { return (waiter, nil) }
        refreshing = nil
        return (waiter, refresh)
    }

    private func isFresh(_ issued: Issued, now: Duration) -> Bool {
        guard let staleAt = issued.staleAt else { return true }
        return now < staleAt
    }

    private mutating func enqueue(id: UInt64, waiter: Waiter, now: Duration) -> Action {
        if isRefreshing {
            waiters.append((id, waiter))
            return .wait
        }
        refreshStarts.removeAll { $0 <= now - window }
        if refreshStarts.count >= maximumRefreshes {
            return .fail(.refreshLoopDetected(limit: maximumRefreshes, window: window))
        }
        refreshStarts.append(now)
        let refresh = nextRefresh
        nextRefresh += 1
        refreshing = refresh
        waiters.append((id, waiter))
        return .startRefresh(current: issued?.credential, refresh: refresh)
    }

    private mutating func store(_ credential: BearerCredential, now: Duration) {
        issued = Issued(
            credential: credential,
            expiresAt: credential.expiresIn.map { now + $0 },
            staleAt: credential.expiresIn.map { now + $0 - min(leeway, $0 / 2) },
            generation: nextGeneration
        )
        nextGeneration += 1
    }

    private mutating func takeWaiters() -> [Waiter] {
        defer { waiters.removeAll() }
        return waiters.map(\.waiter)
    }
}
