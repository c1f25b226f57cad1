#if Examples
import Foundation
import TaskKit
import TaskKitLoopbackServer
import TaskKitTestSupport
import TaskKitTesting
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP

/// BearerTokenAuthenticator inside URLTaskManager, against the loopback server's expiring tokens.
@Suite("Bearer authentication against a loopback server", .serialized)  // one test at a time: each starts its own server and up to 50 requests
struct BearerAuthenticationServerTests {
    /// Signed in with a token the server has already forgotten (expired server side).
    func signedInAuthenticator(
        _ server: LoopbackServer, clock: ManualClock = ManualClock(),
        maximumReplays: Int = 2,
        refresh: BearerTokenAuthenticator.Refresh? = nil
    ) async -> BearerTokenAuthenticator {
        let token = await server.issueToken()
        return BearerTokenAuthenticator(
            credential: BearerCredential(accessToken: token, expiresIn: .seconds(3600)),
            maximumReplays: maximumReplays, clock: clock, refresh: refresh ?? httpTestRefresh(server)
        )
    }

    @Test("50 concurrent requests with an expired token cause exactly one refresh and all succeed", arguments: HTTPTestTransport.allCases)
    func fiftyRequestsOneRefresh(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let authenticator = await signedInAuthenticator(server)
            let manager = URLTaskManager(interceptors: [authenticator, HTTPRetryPolicy()], transport: transport.make(), timeout: TestDeadline.scaled(.seconds(60)))
            await server.expireAllTokens()
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<50 {
                    group.addTask { try await manager.data(for: URLRequest(url: server.url("/protected"))).1.statusCode }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 50))
            #expect(await server.refreshCount() == 1)
            #expect(await server.hits(.token) == 1)
            #expect(authenticator.refreshCount == 1)
            // Each request was sent at most twice: once with the old token, once with the new one.
            #expect(await server.hits(.protected) <= 100)
        }
    }

    @Test("50 requests all rejected before the refresh completes wait for it and share it", arguments: HTTPTestTransport.allCases)
    func fiftyRejectedRequestsWaitForOneRefresh(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let gate = TestGate()
            let inner = httpTestRefresh(server)
            let authenticator = await signedInAuthenticator(server) { current, transport in
                await gate.wait()
                return try await inner(current, transport)
            }
            let manager = URLTaskManager(interceptors: [authenticator], transport: transport.make(), timeout: TestDeadline.scaled(.seconds(60)))
            await server.expireAllTokens()
            let requests = Task {
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<50 {
                        group.addTask { try await manager.data(for: URLRequest(url: server.url("/protected"))).1.statusCode }
                    }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
            }
            // Every request got its 401 and waits (the refresh is held by the gate).
            await eventually(pollingEvery: .milliseconds(5)) { authenticator.waitingRequestCount == 50 }
            #expect(await server.hits(.protected) == 50)
            #expect(gate.waiting == 1)
            gate.open()
            let statuses = try await requests.boundedValue()
            #expect(statuses == Array(repeating: 200, count: 50))
            #expect(await server.refreshCount() == 1)
            #expect(await server.hits(.protected) == 100)
        }
    }

    @Test("a request signed with an older token is replayed with the new one without a second refresh", arguments: HTTPTestTransport.allCases)
    func olderTokenReplayedWithoutSecondRefresh(_ transport: HTTPTestTransport) async throws {
        /// Holds the adapted request of the first task whose URL has `?hold` until the gate opens.
        struct BearerServerTestsHoldingAdapter: URLTaskInterceptor {
            let gate: TestGate
            func adapt(_ request: URLRequest, for task: URLTask, context: URLTaskContext) async throws -> URLRequest {
                if request.url?.query == "hold", context.attempt == 1 { await gate.wait() }
                return request
            }
        }
        try await withHTTPTestServer { server in
            let gate = TestGate()
            let authenticator = await signedInAuthenticator(server)
            let oldToken = try #require(authenticator.credential?.accessToken)
            // The authenticator signs first; the holding adapter then parks request A, signed
            // with the old token.
            let manager = URLTaskManager(
                interceptors: [authenticator, BearerServerTestsHoldingAdapter(gate: gate)],
                transport: transport.make(), timeout: TestDeadline.scaled(.seconds(60))
            )
            await server.expireAllTokens()
            let requestA = Task { try await manager.response(for: URLRequest(url: server.url("/protected?hold"))) }
            await eventually(pollingEvery: .milliseconds(5)) { gate.waiting == 1 }
            // B is rejected, refreshes once, and succeeds with the new token.
            let responseB = try await manager.response(for: URLRequest(url: server.url("/protected")))
            #expect(responseB.statusCode == 200)
            #expect(await server.refreshCount() == 1)
            #expect(authenticator.credential?.accessToken != oldToken)
            // A now goes out with the old token, is rejected, and is replayed with the new token
            // at once: no second refresh.
            gate.open()
            let responseA = try await requestA.boundedValue()
            #expect(responseA.statusCode == 200)
            #expect(await server.refreshCount() == 1)
            #expect(await server.hits(.token) == 1)
            #expect(await server.hits(.protected) == 4)
        }
    }

    @Test("a refresh failure fails every waiting request with AuthenticationError.refreshFailed", arguments: HTTPTestTransport.allCases)
    func refreshFailureFailsWaiters(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let gate = TestGate()
            let inner = httpTestRefresh(server)
            let authenticator = await signedInAuthenticator(server) { current, transport in
                await gate.wait()
                return try await inner(current, transport)
            }
            let manager = URLTaskManager(interceptors: [authenticator, HTTPRetryPolicy()], transport: transport.make(), timeout: TestDeadline.scaled(.seconds(60)))
            await server.expireAllTokens()
            await server.updateKnobs { $0.tokenFailures = 1 }
            let requests = (0..<10).map { _ in
                Task { try await manager.data(for: URLRequest(url: server.url("/protected"))) }
            }
            await eventually(pollingEvery: .milliseconds(5)) { authenticator.waitingRequestCount == 10 }
            gate.open()
            for request in requests {
                let error = await #expect(throws: AuthenticationError.self) { _ = try await request.boundedValue() }
                guard case .refreshFailed(let underlying)? = error else {
                    Issue.record("expected refreshFailed, got \(String(describing: error))")
                    continue
                }
                #expect(underlying as? HTTPTestError == .status(500))
            }
            #expect(await server.hits(.token) == 1)
            #expect(authenticator.refreshCount == 0)
            // The next request tries again, and the token service is back.
            let (_, response) = try await manager.data(for: URLRequest(url: server.url("/protected")))
            #expect(response.statusCode == 200)
            #expect(await server.refreshCount() == 1)
        }
    }

    @Test("a refresh loop (more than 5 refreshes in 30 s) stops with AuthenticationError.refreshLoopDetected", arguments: HTTPTestTransport.allCases)
    func refreshLoopStops(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            // The server forgets every token right after issuing it: each replay gets 401 again.
            // Replays are not what stops this request (see the next test): the window does.
            let authenticator = await signedInAuthenticator(
                server, clock: clock, maximumReplays: 10,
                refresh: httpTestRefresh(server) { await server.expireAllTokens() }
            )
            let manager = URLTaskManager(interceptors: [authenticator, HTTPRetryPolicy()], transport: transport.make(), clock: clock)
            await server.expireAllTokens()
            let error = await #expect(throws: AuthenticationError.self) {
                _ = try await manager.data(for: URLRequest(url: server.url("/protected")))
            }
            guard case .refreshLoopDetected(let limit, let window)? = error else {
                Issue.record("expected refreshLoopDetected, got \(String(describing: error))")
                return
            }
            #expect(limit == 5 && window == .seconds(30))
            #expect(await server.refreshCount() == 5)
            #expect(await server.hits(.protected) == 6)
            #expect(error?.description.contains("more than 5") == true)
        }
    }

    @Test(
        "a server that rejects every new token ends the request after maximumReplays, however slow each refresh is",
        .scaledTimeLimit(minutes: 1),
        arguments: HTTPTestTransport.allCases
    )
    func slowRefreshLoopEnds(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let refreshes = LockedState(0)
            let inner = httpTestRefresh(server) { await server.expireAllTokens() }
            // Each refresh takes 7 s on the authenticator's clock, so the 30 s window never holds
            // five of them; the request must end anyway. (The 20th refresh gives up, so that a
            // missing bound fails the test instead of running until the time limit.)
            let authenticator = await signedInAuthenticator(server, clock: clock) { current, transport in
                let count = refreshes.withLock { count -> Int in
                    count += 1
                    return count
                }
                if count >= 20 { throw HTTPTestError.status(-1) }
                clock.advance(by: .seconds(7))
                return try await inner(current, transport)
            }
            let manager = URLTaskManager(interceptors: [authenticator, HTTPRetryPolicy()], transport: transport.make(), clock: clock)
            await server.expireAllTokens()
            let error = await #expect(throws: AuthenticationError.self) {
                _ = try await manager.data(for: URLRequest(url: server.url("/protected")))
            }
            guard case .credentialRejected(let replays)? = error else {
                Issue.record("expected credentialRejected, got \(String(describing: error))")
                return
            }
            #expect(replays == 2)
            #expect(refreshes.withLock { $0 } == 2)
            #expect(await server.hits(.protected) == 3)  // the first attempt and two replays
            #expect(error?.description.contains("after 2 replays") == true)
        }
    }

    @Test("a token that lives less than the leeway is used: six requests in a row make one refresh", arguments: HTTPTestTransport.allCases)
    func shortLivedTokenIsUsed(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer(knobs: httpTestKnobs { $0.tokenLifetime = 20 }) { server in
            let clock = ManualClock()
            // No credential yet; each token the server issues lives 20 s, the leeway is 30 s.
            let authenticator = BearerTokenAuthenticator(clock: clock, refresh: httpTestRefresh(server))
            let manager = URLTaskManager(interceptors: [authenticator], transport: transport.make(), clock: clock)
            for _ in 0..<6 {
                let (_, response) = try await manager.data(for: URLRequest(url: server.url("/protected")))
                #expect(response.statusCode == 200)
                clock.advance(by: .seconds(1))
            }
            #expect(await server.refreshCount() == 1)
            #expect(await server.hits(.protected) == 6)
        }
    }

    @Test("the refresh is cancelled when its last waiting request leaves; the next request starts a new one", arguments: HTTPTestTransport.allCases)
    func abandonedRefreshIsCancelled(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let gate = TestGate()
            let calls = LockedState((started: 0, cancelled: 0))
            let inner = httpTestRefresh(server)
            let authenticator = await signedInAuthenticator(server) { current, transport in
                calls.withLock { $0.started += 1 }
                await gate.waitOrCancel()
                if Task.isCancelled {
                    calls.withLock { $0.cancelled += 1 }
                    throw CancellationError()
                }
                return try await inner(current, transport)
            }
            let manager = URLTaskManager(interceptors: [authenticator], transport: transport.make())
            await server.expireAllTokens()
            let abandoned = Task { try await manager.data(for: URLRequest(url: server.url("/protected"))) }
            await eventually(pollingEvery: .milliseconds(5)) { authenticator.waitingRequestCount == 1 }
            abandoned.cancel()
            await #expect(throws: CancellationError.self) { _ = try await abandoned.boundedValue() }
            #expect(
                await eventually(pollingEvery: .milliseconds(5)) { calls.withLock { $0.cancelled } == 1 },
                "the refresh nobody waits for was not cancelled"
            )
            // The next request starts a new refresh, which completes.
            let next = Task { try await manager.data(for: URLRequest(url: server.url("/protected"))) }
            await eventually(pollingEvery: .milliseconds(5)) { calls.withLock { $0.started } == 2 }
            gate.open()
            let status = try await next.boundedValue().1.statusCode
            #expect(status == 200)
            #expect(await server.refreshCount() == 1)
            #expect(authenticator.refreshCount == 1)
        }
    }

    @Test("an endless refresh retry is refused, naming the parameter")
    func infiniteRefreshRetryIsRefused() async {
        await #expect(processExitsWith: .failure) {
            _ = BearerTokenAuthenticator(refreshRetry: .infinity()) { _, _ in BearerCredential(accessToken: "t") }
        }
    }

    @Test("refreshes spread over more than the window are not a loop", arguments: HTTPTestTransport.allCases)
    func refreshesOutsideTheWindowAreAllowed(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let authenticator = await signedInAuthenticator(server, clock: clock)
            let manager = URLTaskManager(interceptors: [authenticator], transport: transport.make(), clock: clock)
            for _ in 0..<8 {
                await server.expireAllTokens()
                let (_, response) = try await manager.data(for: URLRequest(url: server.url("/protected")))
                #expect(response.statusCode == 200)
                clock.advance(by: .seconds(7))
            }
            #expect(await server.refreshCount() == 8)
        }
    }

    @Test("a credential that expires within the leeway is refreshed before sending, without a 401", arguments: HTTPTestTransport.allCases)
    func proactiveRefresh(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let token = await server.issueToken()
            let authenticator = BearerTokenAuthenticator(
                credential: BearerCredential(accessToken: token, expiresIn: .seconds(60)),
                refreshLeeway: .seconds(30), clock: clock, refresh: httpTestRefresh(server)
            )
            let manager = URLTaskManager(interceptors: [authenticator], transport: transport.make(), clock: clock)
            _ = try await manager.data(for: URLRequest(url: server.url("/protected")))
            #expect(await server.refreshCount() == 0)
            clock.advance(by: .seconds(31))  // 29 s left: within the leeway
            let (_, response) = try await manager.data(for: URLRequest(url: server.url("/protected")))
            #expect(response.statusCode == 200)
            #expect(await server.refreshCount() == 1)
            #expect(await server.hits(.protected) == 2)  // no request was rejected
            #expect(authenticator.credential?.accessToken != token)
        }
    }

    @Test("without any credential the first request refreshes before sending", arguments: HTTPTestTransport.allCases)
    func noInitialCredential(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let authenticator = BearerTokenAuthenticator(refresh: httpTestRefresh(server))
            let manager = URLTaskManager(interceptors: [authenticator], transport: transport.make())
            let (_, response) = try await manager.data(for: URLRequest(url: server.url("/protected")))
            #expect(response.statusCode == 200)
            #expect(await server.refreshCount() == 1)
            #expect(await server.hits(.protected) == 1)
        }
    }

    @Test("the refresh request bypasses every interceptor", arguments: HTTPTestTransport.allCases)
    func refreshBypassesInterceptors(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let before = HTTPTestRecordingInterceptor()
            let after = HTTPTestRecordingInterceptor()
            let refreshTransports = LockedState<[String]>([])
            let inner = httpTestRefresh(server)
            let authenticator = await signedInAuthenticator(server) { current, transport in
                refreshTransports.withLock { $0.append(String(describing: type(of: transport))) }
                return try await inner(current, transport)
            }
            let transport = HTTPTestRecordingTransport(transport.make())
            let manager = URLTaskManager(interceptors: [before, authenticator, after], transport: transport)
            await server.expireAllTokens()
            let (_, response) = try await manager.data(for: URLRequest(url: server.url("/protected")))
            #expect(response.statusCode == 200)
            #expect(await server.hits(.token) == 1)
            // The refresh went through the manager's bare transport...
            #expect(refreshTransports.withLock { $0 } == ["HTTPTestRecordingTransport"])
            #expect(transport.requests.compactMap { $0.url?.path } == ["/protected", "/token", "/protected"])
            // ...and no interceptor saw it, in any hook.
            for interceptor in [before, after] {
                #expect(interceptor.intercepted == ["/protected"])
                #expect(interceptor.adapted == ["/protected", "/protected"])
                #expect(!interceptor.judged.contains("/token"))
            }
            // It was not signed either.
            let tokenRequest = try #require(transport.requests.first { $0.url?.path == "/token" })
            #expect(tokenRequest.value(forHTTPHeaderField: "Authorization") == nil)
        }
    }

    @Test("a replay after a refresh does not use up the retry policy's budget", arguments: HTTPTestTransport.allCases)
    func replayDoesNotConsumeRetryBudget(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let authenticator = await signedInAuthenticator(server, clock: clock)
            // One retry allowed. The request is rejected (401) and replayed; the replay gets 503
            // (twice: failuresBeforeSuccess = 2 would need two retries, so allow one failure).
            await server.updateKnobs { $0.failuresBeforeSuccess = 1 }
            let manager = URLTaskManager(
                interceptors: [authenticator, httpTestRetryPolicy(count: 1)],
                transport: transport.make(), clock: clock
            )
            await server.expireAllTokens()
            let request = Task { try await manager.response(for: URLRequest(url: server.url("/flaky-protected?key=budget"))) }
            #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(1))
            let response = try await request.boundedValue()
            #expect(response.statusCode == 200)
            #expect(await server.hits(.flakyProtected) == 3)  // 401, 503, 200
            #expect(await server.refreshCount() == 1)
        }
    }

    @Test("cancelling a request that waits for a refresh stops only that request", arguments: HTTPTestTransport.allCases)
    func cancelWhileWaitingForRefresh(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let gate = TestGate()
            let inner = httpTestRefresh(server)
            let authenticator = await signedInAuthenticator(server) { current, transport in
                await gate.wait()
                return try await inner(current, transport)
            }
            let manager = URLTaskManager(interceptors: [authenticator], transport: transport.make())
            await server.expireAllTokens()
            let cancelled = Task { try await manager.data(for: URLRequest(url: server.url("/protected"))) }
            let kept = Task { try await manager.data(for: URLRequest(url: server.url("/protected"))) }
            await eventually(pollingEvery: .milliseconds(5)) { authenticator.waitingRequestCount == 2 }
            cancelled.cancel()
            await #expect(throws: CancellationError.self) { _ = try await cancelled.boundedValue() }
            #expect(authenticator.waitingRequestCount == 1)
            gate.open()
            let keptStatus = try await kept.boundedValue().1.statusCode
            #expect(keptStatus == 200)
            #expect(await server.refreshCount() == 1)
        }
    }
}
#endif
