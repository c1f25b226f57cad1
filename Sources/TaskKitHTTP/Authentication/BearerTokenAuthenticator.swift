import Foundation
import Logging
import TaskKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Bearer-token authentication for ``URLTaskManager``: signs every request, refreshes the token
/// once when it is rejected or about to expire, and replays the rejected requests.
///
/// Install it as the first interceptor of a ``URLTaskManager``. Then:
///
/// - **Signing.** Every attempt of every request gets `Authorization: Bearer <token>` from the
///   current credential.
/// - **Single-flight refresh.** When a response is `401`, the authenticator calls `refresh` once;
///   every request that is rejected, or that starts, while the refresh runs waits for it, then is
///   sent (again) with the new token. Fifty requests rejected at once cause one refresh.
/// - **No second refresh for stale signatures.** A `401` for a request signed with an older token
///   than the current one is replayed with the current token at once.
/// - **Proactive refresh.** When the credential's lifetime ends within
///   `refreshLeeway:` (or within half its lifetime, when that is shorter: a token
///   is always used for the first half of its life), the next request refreshes before sending
///   instead of collecting a `401` first.
/// - **Failure.** When `refresh` throws, every waiting request fails with
///   ``AuthenticationError/refreshFailed(underlying:)``; the old credential is kept and a later
///   `401` may try again.
/// - **Bounded replays.** One request is replayed after a `401` at most
///   `maximumReplays:` times; a further `401` ends it with
///   ``AuthenticationError/credentialRejected(replays:)``, however long each refresh takes.
/// - **Loop guard.** When more than `maximumRefreshes:` refreshes would start
///   within `refreshWindow:` (across all requests), the request fails with
///   ``AuthenticationError/refreshLoopDetected(limit:window:)`` instead.
/// - **Cancellation.** A request whose task is cancelled while it waits stops waiting at once
///   (`CancellationError`); the refresh runs on for the others. When the last waiting request
///   leaves, the refresh task is cancelled and its result ignored; the next request that needs a
///   credential starts a new refresh.
/// - **Bounded refresh.** `refreshRetry:` must be finite, so a failing token
///   endpoint answers every waiting request with
///   ``AuthenticationError/refreshFailed(underlying:)`` after a known number of attempts.
/// - **Bypass.** `refresh` receives the manager's bare transport: the refresh request itself does
///   not pass through any interceptor (so it is neither signed nor retried by them).
///
/// The rules live in a pure state machine held under one lock; the refresh runs in a task of its
/// own (no waiter's task), started and cancelled only by the machine's decisions.
///
/// ```swift
/// let auth = BearerTokenAuthenticator(
///     credential: BearerCredential(accessToken: savedToken, expiresIn: .seconds(3600))
/// ) { current, transport in
///     var request = URLRequest(url: URL(string: "https://auth.example.com/token")!)
///     request.httpMethod = "POST"
///     let (data, _) = try await transport.send(request)
///     let token = try JSONDecoder().decode(TokenResponse.self, from: data)
///     return BearerCredential(accessToken: token.accessToken, expiresIn: .seconds(token.expiresIn))
/// }
/// let manager = URLTaskManager(interceptors: [auth, HTTPRetryPolicy()], transport: URLSessionTransport())
/// ```
public final class BearerTokenAuthenticator: Sendable {
    /// The initialiser's refresh options as one value for the state machine, validated by its
    /// `init` (each option is documented on the authenticator's initialiser).
    struct Configuration: Sendable, Hashable {
        var refreshLeeway: Duration
        var maximumRefreshes: Int
        var refreshWindow: Duration
        var refreshRetry: RetryCount
        var maximumReplays: Int

        /// Invalid values stop with a precondition naming them (see the authenticator's
        /// initialiser).
        init(
            refreshLeeway: Duration = .seconds(30),
            maximumRefreshes: Int = 5,
            refreshWindow: Duration = .seconds(30),
            refreshRetry: RetryCount = .never,
            maximumReplays: Int = 2
        ) {
            precondition(refreshLeeway >= .zero, "BearerTokenAuthenticator: refreshLeeway must be >= 0, got \(refreshLeeway)")
            precondition(maximumRefreshes >= 1, "BearerTokenAuthenticator: maximumRefreshes must be >= 1, got \(maximumRefreshes)")
            precondition(refreshWindow >= .zero, "BearerTokenAuthenticator: refreshWindow must be >= 0, got \(refreshWindow)")
            precondition(maximumReplays >= 0, "BearerTokenAuthenticator: maximumReplays must be >= 0, got \(maximumReplays)")
            precondition(
                refreshRetry.maximumRetries != nil,  // also rejects a negative count
                "BearerTokenAuthenticator: refreshRetry must be finite (.never or .count), got \(refreshRetry)"
            )
            self.refreshLeeway = refreshLeeway
            self.maximumRefreshes = maximumRefreshes
            self.refreshWindow = refreshWindow
            self.refreshRetry = refreshRetry
            self.maximumReplays = maximumReplays
        }
    }

    /// Obtains a new credential. Receives the current credential (nil if none) and the manager's
    /// bare transport, which bypasses every interceptor.
    public typealias Refresh = @Sendable (_ current: BearerCredential?, _ transport: any HTTPTransport) async throws -> BearerCredential

    typealias Waiter = CheckedContinuation<BearerCredential, any Error>
    typealias Machine = BearerAuthenticationStateMachine<Waiter>

    private struct State {
        var machine: Machine
        var nextWaiterID: UInt64 = 0
        var refreshes = 0
        /// The task of the running refresh, by refresh id (at most one entry).
        var refreshTasks: [UInt64: Task<Void, Never>] = [:]
    }

    private let state: LockedState<State>
    /// One refresh: `refresh`, retried per `refreshRetry` on the clock. The state machine starts
    /// at most one at a time (it is the single-flight); each runs in a `Task` of its own.
    private let runRefresh: @Sendable (BearerCredential?, any HTTPTransport) async -> Result<BearerCredential, any Error>
    private let now: @Sendable () -> Duration
    private let logger: Logger
    /// How many times one request is replayed after a `401` (the initialiser's `maximumReplays`).
    let maximumReplays: Int

    /// Creates an authenticator.
    ///
    /// - Parameters:
    ///   - credential: The credential to start with, or `nil` to refresh before the first request.
    ///   - refreshLeeway: Refresh before sending when the credential expires within this
    ///     duration, or within half the credential's lifetime when that is shorter. Default 30 s.
    ///   - maximumRefreshes: The most refreshes allowed within `refreshWindow`; one more stops
    ///     with ``AuthenticationError/refreshLoopDetected(limit:window:)``. Default 5.
    ///   - refreshWindow: The window of that refresh-loop guard. Default 30 s.
    ///   - refreshRetry: How a failing refresh is retried (on `clock`) before the waiting
    ///     requests fail: `.never` or `.count(...)`. Default: no retry.
    ///   - maximumReplays: How many times one request is replayed after a `401`; the next `401`
    ///     fails it with ``AuthenticationError/credentialRejected(replays:)``. Default 2: a
    ///     replay with a token another request refreshed, then one with a token refreshed for it.
    ///   - clock: The clock measuring credential lifetimes and the loop-guard window.
    ///   - logger: Where refreshes are logged (at `.debug`; failures at `.warning`). Silent by default.
    ///   - refresh: Obtains a new credential.
    /// - Precondition: `refreshLeeway` and `refreshWindow` are not negative, `maximumRefreshes` is
    ///   at least 1, `maximumReplays` is not negative, and `refreshRetry` is finite (`.infinity`
    ///   would keep every waiting request waiting for as long as the token endpoint fails).
    public convenience init(
        credential: BearerCredential? = nil,
        refreshLeeway: Duration = .seconds(30),
        maximumRefreshes: Int = 5,
        refreshWindow: Duration = .seconds(30),
        refreshRetry: RetryCount = .never,
        maximumReplays: Int = 2,
        clock: some Clock<Duration> = ContinuousClock(),
        logger: Logger = .silent(label: "TaskKitHTTP"),
        refresh: @escaping Refresh
    ) {
        self.init(
            credential: credential,
            configuration: Configuration(
                refreshLeeway: refreshLeeway, maximumRefreshes: maximumRefreshes, refreshWindow: refreshWindow,
                refreshRetry: refreshRetry, maximumReplays: maximumReplays
            ),
            clock: clock, logger: logger, refresh: refresh
        )
    }

    /// The initialiser the public one validates its options for.
    init(
        credential: BearerCredential?,
        configuration: Configuration,
        clock: some Clock<Duration>,
        logger: Logger,
        refresh: @escaping Refresh
    ) {
        let origin = clock.now
        let now: @Sendable () -> Duration = { origin.duration(to: clock.now) }
        self.now = now
        self.logger = logger
        self.maximumReplays = configuration.maximumReplays
        let retry = configuration.refreshRetry
        self.runRefresh = { current, transport in
            var schedule = retry.makeSchedule()
            while true {
                let result: Result<BearerCredential, any Error>
                do {
                    result = .success(try await refresh(current, transport))
                } catch {
                    result = .failure(error)
                }
                guard case .failure = result, let delay = schedule.nextDelay() else { return result }
                logger.debug("token refresh failed; retrying", metadata: ["delay": "\(delay)"])
                do {
                    try await clock.sleep(until: clock.now.advanced(by: delay), tolerance: nil)
                } catch {
                    return result  // cancelled: the refresh was abandoned, and its result is ignored
                }
            }
        }
        self.state = LockedState(
            State(
                machine: Machine(
                    initial: credential, now: now(),
                    leeway: configuration.refreshLeeway,
                    maximumRefreshes: configuration.maximumRefreshes,
                    window: configuration.refreshWindow
                )
            )
        )
    }

    /// The current credential, if any.
    public var credential: BearerCredential? { state.withLock { $0.machine.issued?.credential } }

    /// How many refreshes have completed successfully.
    public var refreshCount: Int { state.withLock { $0.refreshes } }

    /// How many requests are waiting for the running refresh (for tests and diagnostics).
    var waitingRequestCount: Int { state.withLock { $0.machine.waiters.count } }

    /// `request` with `Authorization: Bearer <token>` from a valid credential, waiting for (or
    /// starting) a refresh when needed.
    public func authorize(_ request: URLRequest, transport: any HTTPTransport) async throws -> URLRequest {
        try await authorize(request, transport: transport, refreshStarted: nil)
    }

    /// ``authorize(_:transport:)``, calling `refreshStarted` (outside the lock) when this call
    /// starts a refresh.
    func authorize(
        _ request: URLRequest, transport: any HTTPTransport, refreshStarted: (@Sendable () -> Void)?
    ) async throws -> URLRequest {
        let credential = try await validCredential(transport: transport, refreshStarted: refreshStarted)
        var request = request
        request.setValue("Bearer \(credential.accessToken)", forHTTPHeaderField: "Authorization")
        return request
    }

    /// Handles a `401` for `request`: returns once a credential newer than the one `request` was
    /// signed with is available (refreshing if needed). The caller then replays the request.
    public func handleUnauthorized(_ request: URLRequest, transport: any HTTPTransport) async throws {
        try await handleUnauthorized(request, transport: transport, refreshStarted: nil)
    }

    /// ``handleUnauthorized(_:transport:)``, calling `refreshStarted` (outside the lock) when this
    /// call starts a refresh.
    func handleUnauthorized(
        _ request: URLRequest, transport: any HTTPTransport, refreshStarted: (@Sendable () -> Void)?
    ) async throws {
        let token = Self.bearerToken(of: request)
        _ = try await wait(transport: transport, refreshStarted: refreshStarted) { machine, id, waiter, now in
            machine.unauthorized(signedWith: token, id: id, waiter: waiter, now: now)
        }
    }

    /// A valid credential, waiting for a refresh if needed.
    func validCredential(
        transport: any HTTPTransport, refreshStarted: (@Sendable () -> Void)? = nil
    ) async throws -> BearerCredential {
        let now = self.now()
        if let issued = state.withLock({ $0.machine.usableCredential(now: now) }) {
            return issued.credential
        }
        return try await wait(transport: transport, refreshStarted: refreshStarted) { machine, id, waiter, now in
            machine.credential(id: id, waiter: waiter, now: now)
        }
    }

    static func bearerToken(of request: URLRequest) -> String? {
        guard let value = request.value(forHTTPHeaderField: "Authorization"), value.hasPrefix("Bearer ") else { return nil }
        return String(value.dropFirst("Bearer ".count))
    }

    private func wait(
        transport: any HTTPTransport,
        refreshStarted: (@Sendable () -> Void)? = nil,
        _ decide: @escaping @Sendable (inout Machine, UInt64, Waiter, Duration) -> Machine.Action
    ) async throws -> BearerCredential {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: Waiter) in
                let now = self.now()
                // `nil`: the task was cancelled before the waiter could be registered (the
                // cancellation handler then found nothing to remove), so it must not wait.
                let action = state.withLock { state -> Machine.Action? in
                    if Task.isCancelled { return nil }
                    return decide(&state.machine, id, continuation, now)
                }
                switch action {
                case nil:
                    continuation.resume(throwing: CancellationError())
                case .use(let issued):
                    continuation.resume(returning: issued.credential)
                case .wait:
                    break
                case .startRefresh(let current, let refresh):
                    refreshStarted?()
                    startRefresh(refresh, from: current, transport: transport)
                case .fail(let error):
                    logger.warning("token refresh refused: \(error)")
                    continuation.resume(throwing: error)
                }
            }
        } onCancel: {
            let (waiter, abandoned) = state.withLock { state in
                let (waiter, abandoned) = state.machine.cancel(id: id)
                return (waiter, abandoned.flatMap { state.refreshTasks.removeValue(forKey: $0) })
            }
            waiter?.resume(throwing: CancellationError())
            if let abandoned {
                logger.debug("token refresh abandoned: no request waits for it")
                abandoned.cancel()
            }
        }
    }

    private func startRefresh(_ refresh: UInt64, from current: BearerCredential?, transport: any HTTPTransport) {
        logger.debug("token refresh started")
        // The refresh belongs to no single waiter (it runs in a task of its own): it ends when
        // it finishes, or is cancelled when the machine abandons it (its last waiter left).
        let task = Task.detached { [self] in
            finishRefresh(refresh, await runRefresh(current, transport))
        }
        let running = state.withLock { state -> Bool in
            guard state.machine.refreshing == refresh else { return false }
            state.refreshTasks[refresh] = task
            return true
        }
        // Abandoned (or finished) before its task was recorded: cancelling a finished task does nothing.
        if !running { task.cancel() }
    }

    private func finishRefresh(_ refresh: UInt64, _ result: Result<BearerCredential, any Error>) {
        let now = self.now()
        switch result {
        case .success(let credential):
            let waiters = state.withLock { state -> [Waiter]? in
                state.refreshTasks[refresh] = nil
                guard let (_, waiters) = state.machine.refreshSucceeded(credential, refresh: refresh, now: now) else {
                    return nil
                }
                state.refreshes += 1
                return waiters
            }
            guard let waiters else { return }  // abandoned: nobody waits for this credential
            logger.debug("token refresh succeeded", metadata: ["waiters": "\(waiters.count)"])
            for waiter in waiters { waiter.resume(returning: credential) }
        case .failure(let error):
            let waiters = state.withLock { state -> [Waiter]? in
                state.refreshTasks[refresh] = nil
                return state.machine.refreshFailed(refresh: refresh)
            }
            guard let waiters else { return }
            logger.warning("token refresh failed: \(error)", metadata: ["waiters": "\(waiters.count)"])
            for waiter in waiters { waiter.resume(throwing: AuthenticationError.refreshFailed(underlying: error)) }
        }
    }
}
