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
///   ``Configuration/refreshLeeway``, the next request refreshes before sending instead of
///   collecting a `401` first.
/// - **Failure.** When `refresh` throws, every waiting request fails with
///   ``AuthenticationError/refreshFailed(underlying:)``; the old credential is kept and a later
///   `401` may try again.
/// - **Loop guard.** When more than ``Configuration/maximumRefreshes`` refreshes would start
///   within ``Configuration/refreshWindow``, the request fails with
///   ``AuthenticationError/refreshLoopDetected(limit:window:)`` instead.
/// - **Cancellation.** A request whose task is cancelled while it waits stops waiting at once
///   (`CancellationError`); the refresh itself runs on for the others and is never cancelled by a
///   waiter.
/// - **Bypass.** `refresh` receives the manager's bare transport: the refresh request itself does
///   not pass through any interceptor (so it is neither signed nor retried by them).
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
/// let manager = URLTaskManager(interceptors: [auth, HTTPRetryPolicy()])
/// ```
public final class BearerTokenAuthenticator: Sendable {
    /// Tuning of the refresh behaviour.
    public struct Configuration: Sendable, Hashable {
        /// Refresh before sending when the credential expires within this duration. Default 30 s.
        public var refreshLeeway: Duration
        /// The most refreshes allowed within ``refreshWindow``. Default 5.
        public var maximumRefreshes: Int
        /// The window of the refresh-loop guard. Default 30 s.
        public var refreshWindow: Duration
        /// How a failing refresh is retried (on the authenticator's clock) before the waiting
        /// requests fail. Default: no retry.
        public var refreshRetry: RetryCount

        /// Creates a configuration; invalid values stop with a precondition naming them.
        public init(
            refreshLeeway: Duration = .seconds(30),
            maximumRefreshes: Int = 5,
            refreshWindow: Duration = .seconds(30),
            refreshRetry: RetryCount = .never
        ) {
            precondition(refreshLeeway >= .zero, "BearerTokenAuthenticator: refreshLeeway must be >= 0, got \(refreshLeeway)")
            precondition(maximumRefreshes >= 1, "BearerTokenAuthenticator: maximumRefreshes must be >= 1, got \(maximumRefreshes)")
            precondition(refreshWindow >= .zero, "BearerTokenAuthenticator: refreshWindow must be >= 0, got \(refreshWindow)")
            self.refreshLeeway = refreshLeeway
            self.maximumRefreshes = maximumRefreshes
            self.refreshWindow = refreshWindow
            _ = refreshRetry.maximumRetries  // rejects a negative count
            self.refreshRetry = refreshRetry
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
    }

    private let state: LockedState<State>
    /// One refresh: `refresh`, retried per `refreshRetry` on the clock. The state machine starts
    /// at most one at a time (it is the single-flight); each runs in a `Task` of its own.
    private let runRefresh: @Sendable (BearerCredential?, any HTTPTransport) async -> Result<BearerCredential, any Error>
    private let now: @Sendable () -> Duration
    private let logger: Logger

    /// Creates an authenticator.
    ///
    /// - Parameters:
    ///   - credential: The credential to start with, or `nil` to refresh before the first request.
    ///   - configuration: Refresh tuning.
    ///   - clock: The clock measuring credential lifetimes and the loop-guard window.
    ///   - logger: Where refreshes are logged (at `.debug`; failures at `.warning`). Silent by default.
    ///   - refresh: Obtains a new credential.
    public init(
        credential: BearerCredential? = nil,
        configuration: Configuration = Configuration(),
        clock: some Clock<Duration> = ContinuousClock(),
        logger: Logger = .silent(label: "TaskKitHTTP"),
        refresh: @escaping Refresh
    ) {
        let origin = clock.now
        let now: @Sendable () -> Duration = { origin.duration(to: clock.now) }
        self.now = now
        self.logger = logger
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
                    return result  // only cancellation ends a sleep early, and nothing cancels this task
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
                case .startRefresh(let current):
                    refreshStarted?()
                    startRefresh(from: current, transport: transport)
                case .fail(let error):
                    logger.warning("token refresh refused: \(error)")
                    continuation.resume(throwing: error)
                }
            }
        } onCancel: {
            state.withLock { $0.machine.cancel(id: id) }?.resume(throwing: CancellationError())
        }
    }

    private func startRefresh(from current: BearerCredential?, transport: any HTTPTransport) {
        logger.debug("token refresh started")
        // The refresh belongs to no single waiter (it runs in a task of its own), so no waiter's
        // cancellation can cancel it.
        Task.detached { [self] in
            finishRefresh(await runRefresh(current, transport))
        }
    }

    private func finishRefresh(_ result: Result<BearerCredential, any Error>) {
        let now = self.now()
        switch result {
        case .success(let credential):
            let waiters = state.withLock { state -> [Waiter] in
                state.refreshes += 1
                return state.machine.refreshSucceeded(credential, now: now).1
            }
            logger.debug("token refresh succeeded", metadata: ["waiters": "\(waiters.count)"])
            for waiter in waiters { waiter.resume(returning: credential) }
        case .failure(let error):
            let waiters = state.withLock { $0.machine.refreshFailed() }
            logger.warning("token refresh failed: \(error)", metadata: ["waiters": "\(waiters.count)"])
            for waiter in waiters { waiter.resume(throwing: AuthenticationError.refreshFailed(underlying: error)) }
        }
    }
}

/// Logging helpers of TaskKitHTTP.
public enum TaskKitHTTPLogging {
    /// A logger that discards everything, labelled `TaskKitHTTP`.
    @available(*, deprecated, renamed: "Logger.silent(label:)")
    public static var silent: Logger {
        .silent(label: "TaskKitHTTP")
    }
}
