/// The rules of bearer-token authentication, as a pure value type (no locks, no tasks, no clock).
///
/// Time is a `Duration` offset on the owner's clock. A waiter is an opaque value (a continuation
/// in production, anything in tests) that the machine hands back in its actions for the owner to
/// resume after unlocking.
///
/// Rules:
/// - A request needs a credential. With a credential that is not about to expire (`leeway`) and no
///   refresh running, it gets it at once.
/// - Otherwise it waits. The first waiter starts the (one) refresh; later ones join it.
/// - A 401 for a request signed with token `t`: if the current credential's token is not `t` (a
///   newer credential exists), the request is replayed with it without a refresh; if a refresh runs, it waits for it; otherwise it starts one.
/// - Starting a refresh when `maximumRefreshes` already started within `window` fails that waiter
///   with ``AuthenticationError/refreshLoopDetected(limit:window:)``.
/// - A refresh's success resumes every waiter with the new credential; its failure resumes every
///   waiter with ``AuthenticationError/refreshFailed(underlying:)`` and keeps the old credential.
/// - A cancelled waiter is removed and handed back; the refresh goes on for the others.
struct BearerAuthenticationStateMachine<Waiter> {
    /// A credential with its expiry and generation (1 for the first, +1 per refresh).
    struct Issued: Equatable {
        var credential: BearerCredential
        var expiresAt: Duration?
        var generation: UInt64
    }

    enum Action {
        /// Use this credential (resume the waiter, if one was passed, with it).
        case use(Issued)
        /// The waiter was enqueued behind a running refresh; nothing to do.
        case wait
        /// The waiter was enqueued; start a refresh from `current`.
        case startRefresh(current: BearerCredential?)
        /// Fail with this error (the waiter was not enqueued).
        case fail(AuthenticationError)
    }

    let leeway: Duration
    let maximumRefreshes: Int
    let window: Duration

    private(set) var issued: Issued?
    private(set) var isRefreshing = false
    private(set) var waiters: [(id: UInt64, waiter: Waiter)] = []
    private(set) var refreshStarts: [Duration] = []
    private var nextGeneration: UInt64 = 1

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

    /// The refresh produced `credential`: returns the waiters to resume with the new credential.
    mutating func refreshSucceeded(_ credential: BearerCredential, now: Duration) -> (Issued, [Waiter]) {
        precondition(isRefreshing, "refreshSucceeded without a running refresh")
        isRefreshing = false
        store(credential, now: now)
        return (issued!, takeWaiters())
    }

    /// The refresh failed: returns the waiters to fail.
    mutating func refreshFailed() -> [Waiter] {
        precondition(isRefreshing, "refreshFailed without a running refresh")
        isRefreshing = false
        return takeWaiters()
    }

    /// Removes a waiter whose task was cancelled; `nil` if it was already resumed.
    mutating func cancel(id: UInt64) -> Waiter? {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return waiters.remove(at: index).waiter
    }

    private func isFresh(_ issued: Issued, now: Duration) -> Bool {
        guard let expiresAt = issued.expiresAt else { return true }
        return now + leeway < expiresAt
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
        isRefreshing = true
        waiters.append((id, waiter))
        return .startRefresh(current: issued?.credential)
    }

    private mutating func store(_ credential: BearerCredential, now: Duration) {
        issued = Issued(
            credential: credential,
            expiresAt: credential.expiresIn.map { now + $0 },
            generation: nextGeneration
        )
        nextGeneration += 1
    }

    private mutating func takeWaiters() -> [Waiter] {
        defer { waiters.removeAll() }
        return waiters.map(\.waiter)
    }
}
