#if Examples
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TaskKit
import TaskKitHTTP

extension Scenario {
    /// URLTaskManager: bearer authentication with a single-flight refresh, and the retry policy.
    static let urlTaskManager = Scenario(name: "http", title: "URLTaskManager — one refresh for 50 requests, retries") { context, record in
        let server = context.server

        // 1. Signed in with a token that the server then expires: 50 concurrent requests all get
        //    a 401 (or start while the refresh runs); one refresh happens; all 50 are replayed.
        let signedIn = await server.issueToken()
        let authenticator = BearerTokenAuthenticator(
            credential: BearerCredential(accessToken: signedIn, expiresIn: .seconds(3600))
        ) { _, transport in
            var request = URLRequest(url: server.url("/token"))
            request.httpMethod = "POST"
            let (data, response) = try await transport.send(request)
            guard response.statusCode == 200 else { throw DemoError.status(response.statusCode) }
            let token = try JSONDecoder().decode(DemoTokenResponse.self, from: data)
            return BearerCredential(accessToken: token.access_token, expiresIn: .seconds(token.expires_in))
        }
        let retry = HTTPRetryPolicy(
            retry: .count(count: 3, intervalProxy: .exponential(
                initial: .milliseconds(50), scaleRate: 2, maximumDelay: .milliseconds(500), jitter: .full
            ))
        )
        let manager = URLTaskManager(
            interceptors: [authenticator, retry], transport: URLSessionTransport(), timeout: .seconds(20)
        )

        await server.expireAllTokens()
        let refreshesBefore = await server.refreshCount()
        let requests = 50
        let started = ContinuousClock.now
        let statuses = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<requests {
                group.addTask {
                    do {
                        let (_, response) = try await manager.data(for: URLRequest(url: server.url("/protected")))
                        return response.statusCode
                    } catch {
                        return -1
                    }
                }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        let elapsed = started.duration(to: .now)
        let refreshes = await server.refreshCount() - refreshesBefore
        let succeeded = statuses.filter { $0 == 200 }.count
        record.measure(
            "expired token",
            "\(requests) concurrent requests: \(refreshes) refresh, \(succeeded) × 200 in \(elapsed.milliseconds)"
        )
        record.expect("requests answered 200 after the refresh", succeeded, equals: requests)
        record.expect("token refreshes on the server", refreshes, equals: 1)
        record.expect("refreshes counted by the authenticator", authenticator.refreshCount, equals: 1)

        // The same 50 requests with the same expired token, each refreshing on its own 401.
        let naive = await measuredRun(server, counting: { await $0.refreshCount() }) {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<requests {
                    group.addTask { _ = try? await context.naiveProtectedGet(token: signedIn) }
                }
            }
        }
        record.compare(
            "http", workload: "\(requests) concurrent requests, expired token", counted: "POST /token",
            naive: naive, taskKit: Comparison.Run(count: refreshes, seconds: elapsed.seconds)
        )

        // 2. A flaky endpoint answers 503 twice, then 200: the retry policy gets there.
        let key = "demo-\(UUID().uuidString.prefix(8))"
        let flakyHitsBefore = await server.hits(.flaky)
        let (_, flaky) = try await manager.data(for: URLRequest(url: server.url("/flaky?key=\(key)")))
        let attempts = await server.hits(.flaky) - flakyHitsBefore
        let failures = await server.knobs().failuresBeforeSuccess
        record.measure("flaky endpoint", "\(failures) × 503, then \(flaky.statusCode) after \(attempts) attempts")
        record.expect("flaky endpoint status after retries", flaky.statusCode, equals: 200)
        record.expect("attempts on the flaky endpoint", attempts, equals: failures + 1)

        // 3. A POST is not idempotent: the same policy does not retry its 500.
        await server.updateKnobs { $0.tokenFailures = 1 }
        var post = URLRequest(url: server.url("/token"))
        post.httpMethod = "POST"
        let tokenHitsBefore = await server.hits(.token)
        let (_, rejected) = try await manager.data(for: post)
        let postAttempts = await server.hits(.token) - tokenHitsBefore
        record.measure("POST answered 500", "returned to the caller after \(postAttempts) attempt, not retried")
        record.expect("attempts of a non-idempotent request", postAttempts, equals: 1)
        record.expect("status returned to the caller", rejected.statusCode, equals: 500)
        await manager.waitTillAllTasksFinished()
    }
}

/// The token endpoint's answer.
struct DemoTokenResponse: Decodable {
    let access_token: String
    let expires_in: Double
}
#endif
