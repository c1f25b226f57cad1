#if Examples
#if AsyncHTTPClient
import AsyncHTTPClient
import TaskKitAsyncHTTPClient
#endif
import Foundation
import Logging
import TaskKit
import TaskKitLoopbackServer
import TaskKitTestSupport
import TaskKitTesting
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP

/// The transports the server tests run against, each with the same expected outcomes
/// (AsyncHTTPClient's with the package trait `AsyncHTTPClient`).
enum HTTPTestTransport: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case urlSession = "URLSession"
    #if AsyncHTTPClient
    case asyncHTTPClient = "AsyncHTTPClient"
    #endif

    var testDescription: String { rawValue }

    /// A new transport of this kind.
    func make() -> any HTTPTransport {
        switch self {
        case .urlSession: URLSessionTransport()
        #if AsyncHTTPClient
        case .asyncHTTPClient: AsyncHTTPClientTransport(client: Self.client)
        #endif
        }
    }

    #if AsyncHTTPClient
    /// One client for every test, with the configuration the transport recommends, as many
    /// connections per host as the tests send requests at once (50), and a connect timeout that
    /// a machine loaded by a sanitizer run can meet; it lives as long as the test process, so it
    /// is never shut down.
    static let client: HTTPClient = {
        var configuration = AsyncHTTPClientTransport.recommendedConfiguration
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
        configuration.timeout.connect = .seconds(60)
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()
    #endif
}

/// The server knobs of the HTTP tests: the defaults, but a token the server issues is accepted
/// for an hour of real time (`tokenAcceptedFor`), whatever lifetime it announces. The clients'
/// clocks are manual, so no test waits for a token to expire in real time; a test that took
/// longer than a token's announced lifetime on a loaded machine (a sanitizer run) must not see
/// it rejected.
func httpTestKnobs(_ change: (inout LoopbackServer.Knobs) -> Void = { _ in }) -> LoopbackServer.Knobs {
    var knobs = LoopbackServer.Knobs()
    knobs.tokenAcceptedFor = 3600
    change(&knobs)
    return knobs
}

/// Starts a loopback server (127.0.0.1, free ports), runs `body`, and always stops the server.
func withHTTPTestServer<R>(
    knobs: LoopbackServer.Knobs = httpTestKnobs(),
    _ body: (LoopbackServer) async throws -> R
) async throws -> R {
    let server = try await LoopbackServer.start(knobs: knobs)
    #expect(server.baseURL.host == "127.0.0.1")
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}

/// The JSON of the loopback server's `POST /token`.
struct HTTPTestTokenResponse: Decodable {
    let access_token: String
    let expires_in: Double
}

/// A refresh closure that asks `server`'s `POST /token` for a token, through the bare transport.
func httpTestRefresh(
    _ server: LoopbackServer,
    afterIssuing: (@Sendable () async -> Void)? = nil
) -> BearerTokenAuthenticator.Refresh {
    { _, transport in
        var request = URLRequest(url: server.url("/token"))
        request.httpMethod = "POST"
        let (data, response) = try await transport.send(request)
        guard response.statusCode == 200 else { throw HTTPTestError.status(response.statusCode) }
        let token = try JSONDecoder().decode(HTTPTestTokenResponse.self, from: data)
        await afterIssuing?()
        return BearerCredential(accessToken: token.access_token, expiresIn: .seconds(token.expires_in))
    }
}

enum HTTPTestError: Error, Equatable {
    case status(Int)
    case adapterRefused
}

/// A transport that forwards to another and records every request and outcome.
final class HTTPTestRecordingTransport: HTTPTransport {
    let inner: any HTTPTransport
    private let log = LockedState<[(request: URLRequest, outcome: Result<Int, any Error>?)]>([])

    init(_ inner: any HTTPTransport = URLSessionTransport()) { self.inner = inner }

    var requests: [URLRequest] { log.withLock { $0.map(\.request) } }
    var outcomes: [Result<Int, any Error>?] { log.withLock { $0.map(\.outcome) } }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let index = log.withLock { log -> Int in
            log.append((request, nil))
            return log.count - 1
        }
        do {
            let (data, response) = try await inner.send(request)
            log.withLock { $0[index].outcome = .success(response.statusCode) }
            return (data, response)
        } catch {
            log.withLock { $0[index].outcome = .failure(error) }
            throw error
        }
    }
}

/// An interceptor that records what it sees in each hook.
final class HTTPTestRecordingInterceptor: URLTaskInterceptor {
    private let log = LockedState<(intercepted: [String], adapted: [String], judged: [String])>(([], [], []))

    var intercepted: [String] { log.withLock { $0.intercepted } }
    var adapted: [String] { log.withLock { $0.adapted } }
    var judged: [String] { log.withLock { $0.judged } }

    func intercept(task: inout URLTask, currentBatchCount: Int) -> InterceptCommand {
        let path = task.request.url?.path ?? "-"
        log.withLock { $0.intercepted.append(path) }
        return .execute
    }

    func adapt(_ request: URLRequest, for task: URLTask, context: URLTaskContext) async throws -> URLRequest {
        let path = request.url?.path ?? "-"
        log.withLock { $0.adapted.append(path) }
        return request
    }

    func retry(
        _ request: URLRequest, for task: URLTask, dueTo outcome: Result<URLTaskResponse, any Error>,
        context: URLTaskContext
    ) async throws -> URLTaskRetryDecision {
        let path = request.url?.path ?? "-"
        log.withLock { $0.judged.append(path) }
        return .doNotRetry
    }
}

/// A retry policy without jitter: delays 1 s, 2 s, then capped at 3 s.
func httpTestRetryPolicy(count: Int = 3, jitter: IntervalProxy.Jitter = .none) -> HTTPRetryPolicy {
    HTTPRetryPolicy(
        retry: .count(
            count: count,
            intervalProxy: .exponential(initial: .seconds(1), scaleRate: 2, maximumDelay: .seconds(3), jitter: jitter)
        )
    )
}

/// Expects `task` to fail with `TaskError.timedOut`.
func expectTimedOut<T: Sendable>(_ task: Task<T, any Error>, sourceLocation: SourceLocation = #_sourceLocation) async {
    let error = await #expect(throws: TaskError.self, sourceLocation: sourceLocation) { _ = try await task.boundedValue() }
    guard case .timedOut? = error else {
        Issue.record("expected TaskError.timedOut, got \(String(describing: error))", sourceLocation: sourceLocation)
        return
    }
}

extension LoopbackServer {
    /// Waits (at most 30 s of real time) until the server has read `count` requests of `endpoint`.
    func httpTestServed(_ endpoint: Endpoint, _ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
        await eventually("the server read \(count) requests of \(endpoint)", pollingEvery: .milliseconds(2), sourceLocation: sourceLocation) {
            await self.hits(endpoint) == count
        }
    }
}

extension ManualClock {
    /// Waits (at most 30 s of real time) until exactly `count` tasks sleep on the clock.
    func httpTestSleepers(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
        await eventually("\(count) sleepers on the clock", pollingEvery: .milliseconds(2), sourceLocation: sourceLocation) {
            self.sleeperCount == count
        }
    }

    /// Waits (at most 30 s of real time, so a missing sleeper fails the test instead of hanging
    /// it) for a sleeper, moves time to its deadline and returns the delay it slept; `nil`, with
    /// a recorded issue, when nobody went to sleep.
    func httpTestAdvanceToNextSleeper(sourceLocation: SourceLocation = #_sourceLocation) async -> Duration? {
        guard await eventually(
            "somebody sleeps on the manual clock", pollingEvery: .milliseconds(5), sourceLocation: sourceLocation,
            { self.sleeperCount >= 1 }
        ) else { return nil }
        let before = now
        advanceToNextDeadline()
        return before.duration(to: now)
    }
}
#endif
