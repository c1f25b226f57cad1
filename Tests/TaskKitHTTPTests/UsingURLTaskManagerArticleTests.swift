#if Examples && AsyncHTTPClient
// The code of the DocC article Sources/TaskKitHTTP/TaskKitHTTP.docc/UsingURLTaskManager.md,
// compiled and run against the loopback server so the article is proven to work. Keep the two in
// step: the article shows exactly these declarations (the type names carry an `Article` prefix
// here only to stay unique within the test target).
import AsyncHTTPClient
import Foundation
import Synchronization
import TaskKit
import TaskKitAsyncHTTPClient
@testable import TaskKitHTTP
import TaskKitLoopbackServer
import TaskKitTestSupport
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// MARK: - Article code

/// The signed-in user of the article: an access token that can be refreshed.
final class ArticleUserSession: Sendable {
    private let token: Mutex<String>
    let tokenURL: URL

    init(token: String, tokenURL: URL) {
        self.token = Mutex(token)
        self.tokenURL = tokenURL
    }

    var authorization: String { "Bearer \(token.withLock { $0 })" }

    func refreshAuthorizationToken() async throws {
        struct TokenResponse: Decodable { let access_token: String }
        var request = URLRequest(url: tokenURL)
        request.httpMethod = "POST"
        // A plain URLSession: the refresh does not go through the manager's interceptors.
        let (data, response) = try await URLSession.shared.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw URLError(.userAuthenticationRequired) }
        let fresh = try JSONDecoder().decode(TokenResponse.self, from: data).access_token
        token.withLock { $0 = fresh }
    }
}

/// The seed's interceptor: adds the user's `Authorization` header to every request.
struct ArticleAuthorizationInterceptor: URLTaskInterceptor {
    let user: ArticleUserSession

    func intercept(task: inout URLTask, currentBatchCount: Int) -> InterceptCommand {
        task.request.setValue(user.authorization, forHTTPHeaderField: "Authorization")
        return .execute
    }
}

/// The seed's reactor: on a 401, refreshes the token, then sends the request again.
struct ArticleRefreshOn401Reactor: URLTaskReactor {
    let user: ArticleUserSession

    var configuration: ReactorConfiguration {
        ReactorConfiguration(
            timeout: TestDeadline.scaled(.seconds(30)),  // the article's 30 s, scaled for slow runs
            requeuesTask: true,  // send the request again after the refresh...
            suspendsTaskQueue: true,  // ...hold new requests while it runs...
            reinterceptOnRequeue: true  // ...and sign them again with the new token.
        )
    }

    func shouldExecute(
        after result: Result<URLTaskResponse, any Error>, from task: URLTask, with handle: TaskHandle
    ) -> Bool {
        guard case .success(let response) = result else { return false }
        return response.statusCode == 401
    }

    func execute() async throws {
        try await user.refreshAuthorizationToken()
    }
}

/// The built-in equivalent of both, plus retries.
func articleBuiltInManager(tokenURL: URL, savedToken: String) -> URLTaskManager {
    struct TokenResponse: Decodable {
        let access_token: String
        let expires_in: Double
    }
    let authenticator = BearerTokenAuthenticator(
        credential: BearerCredential(accessToken: savedToken, expiresIn: .seconds(3600))
    ) { current, transport in
        var request = URLRequest(url: tokenURL)
        request.httpMethod = "POST"
        let (data, response) = try await transport.send(request)
        guard response.statusCode == 200 else { throw URLError(.userAuthenticationRequired) }
        let token = try JSONDecoder().decode(TokenResponse.self, from: data)
        return BearerCredential(accessToken: token.access_token, expiresIn: .seconds(token.expires_in))
    }
    // The article's 30 s, scaled as every hang guard is (`TestDeadline`): under ThreadSanitizer in
    // CI, ten requests and a refresh once took longer than 30 s (a `TaskError.timedOut`).
    return URLTaskManager(
        interceptors: [authenticator, HTTPRetryPolicy()], transport: URLSessionTransport(),
        timeout: TestDeadline.scaled(.seconds(30))
    )
}

// MARK: - Proof

@Suite("The UsingURLTaskManager article's code")
struct UsingURLTaskManagerArticleTests {
    @Test("the seed's interceptor signs requests and its reactor refreshes on 401 and requeues")
    func seedInterceptorAndReactor() async throws {
        try await withHTTPTestServer { server in
            let user = ArticleUserSession(token: await server.issueToken(), tokenURL: server.url("/token"))
            let manager = URLTaskManager(
                interceptors: [ArticleAuthorizationInterceptor(user: user)],
                reactors: [ArticleRefreshOn401Reactor(user: user)],
                transport: URLSessionTransport()
            )
            let (first, _) = try await manager.data(for: URLRequest(url: server.url("/protected")))
            #expect(String(decoding: first, as: UTF8.self).contains("loopback"))
            #expect(await server.refreshCount() == 0)

            await server.expireAllTokens()
            let (_, response) = try await manager.data(for: URLRequest(url: server.url("/protected")))
            #expect(response.statusCode == 200)
            #expect(await server.refreshCount() == 1)
            #expect(await server.hits(.protected) == 3)  // 200, then 401 and 200 after the refresh

            // Concurrent requests all get through (possibly with more than one refresh: use the
            // built-in authenticator when exactly one matters).
            await server.expireAllTokens()
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<10 {
                    group.addTask { try await manager.data(for: URLRequest(url: server.url("/protected"))).1.statusCode }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 10))
        }
    }

    @Test("coalescing: a screen of 30 avatars, 12 of them the same person, makes 19 requests", arguments: HTTPTestTransport.allCases)
    func coalescedAvatars(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let visibleUsers = (0..<30).map { $0 < 12 ? "ada" : "user-\($0)" }
            @Sendable func avatarURL(of user: String) -> URL { server.url("/profile?user=\(user)") }
            // The article's code.
            let manager = URLTaskManager(
                interceptors: [HTTPRetryPolicy()],
                transport: transport.make(),
                coalescing: .standard   // GET and HEAD
            )
            // The server holds the profiles until all 30 callers wait for a flight: "ada"'s first
            // request is in flight while the screen asks, however slow the machine.
            await server.holdProfiles()
            let release = Task {
                await eventually("every caller waits for a flight", pollingEvery: .milliseconds(2)) {
                    manager.coalescer?.waitingCallers == 30
                }
                await server.releaseProfiles()
            }
            let avatars = try await withThrowingTaskGroup(of: (Int, Data).self) { group in
                for (row, user) in visibleUsers.enumerated() {
                    group.addTask {
                        let (data, _) = try await manager.data(for: URLRequest(url: avatarURL(of: user)))
                        return (row, data)
                    }
                }
                return try await group.reduce(into: [Int: Data]()) { $0[$1.0] = $1.1 }
            }
            await release.value
            #expect(avatars.count == 30)
            #expect(Set((0..<12).compactMap { avatars[$0] }).count == 1)
            #expect(await server.hits(.profile) == 19)
        }
    }

    @Test("coalescing behind a KeyedMonoTask: repeats come from memory, a burst makes one request")
    func coalescingBehindACache() async throws {
        try await withHTTPTestServer { server in
            @Sendable func profileURL(of user: String) -> URL { server.url("/profile?user=\(user)") }
            let manager = URLTaskManager(transport: URLSessionTransport(), coalescing: .standard)
            // The article's code.
            let profiles = KeyedMonoTask<String, Data>(maximumEntries: 10_000, resultExpireDuration: .seconds(30)) { user in
                try await manager.data(for: URLRequest(url: profileURL(of: user))).0
            }
            let burst = try await withThrowingTaskGroup(of: Data.self) { group in
                for _ in 0..<20 { group.addTask { try await profiles.value(for: "ada") } }
                return try await group.reduce(into: [Data]()) { $0.append($1) }
            }
            #expect(Set(burst).count == 1)
            _ = try await profiles.value(for: "ada")
            #expect(await server.hits(.profile) == 1)
        }
    }

    @Test("on a server: the manager, the authenticator and the retry policy over AsyncHTTPClient")
    func onAServer() async throws {
        try await withHTTPTestServer { server in
            let authenticator = BearerTokenAuthenticator(
                credential: BearerCredential(accessToken: await server.issueToken(), expiresIn: .seconds(3600)),
                refresh: httpTestRefresh(server)
            )
            // The article's setup.
            let client = HTTPClient(
                eventLoopGroup: HTTPClient.defaultEventLoopGroup,
                configuration: AsyncHTTPClientTransport.recommendedConfiguration
            )
            // The article's deadline is 10 s; here it is a hang guard scaled as every other
            // (`TestDeadline`): under ThreadSanitizer, with the suite's other tests in parallel,
            // the refresh and the request took longer than 10 s once, a TaskError.timedOut.
            let manager = URLTaskManager(
                interceptors: [authenticator, HTTPRetryPolicy()],
                transport: AsyncHTTPClientTransport(client: client),
                timeout: TestDeadline.scaled(.seconds(60))
            )
            await server.expireAllTokens()
            // The client is shut down whatever the request does: one left to its deinit stops the
            // process (AsyncHTTPClient's precondition), which would turn a failed request into a
            // crash of the whole test run.
            let outcome: Result<(Data, HTTPURLResponse), any Error>
            do {
                outcome = .success(try await manager.data(for: URLRequest(url: server.url("/protected"))))
            } catch {
                outcome = .failure(error)
            }
            try await client.shutdown()
            let (data, response) = try outcome.get()
            #expect(response.statusCode == 200)
            #expect(String(decoding: data, as: UTF8.self).contains("loopback"))
            #expect(await server.refreshCount() == 1)
        }
    }

    @Test("the built-in authenticator and retry policy: one refresh, retries")
    func builtIn() async throws {
        try await withHTTPTestServer { server in
            let manager = articleBuiltInManager(tokenURL: server.url("/token"), savedToken: await server.issueToken())
            await server.expireAllTokens()
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<10 {
                    group.addTask { try await manager.data(for: URLRequest(url: server.url("/protected"))).1.statusCode }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 10))
            #expect(await server.refreshCount() == 1)
        }
    }
}
#endif
