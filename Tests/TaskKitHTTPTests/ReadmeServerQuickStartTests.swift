#if Examples && AsyncHTTPClient
// The README's server quick start, against the loopback server, so it is known to compile and do
// what the README says. Keep the two in step: the code between the markers is the README's, but
// for `profileURL(of:)` (the loopback server's profile endpoint) and the timeout: 30 s, scaled
// (the README's 5 s ran out once in CI's step 3, where the first request waits behind every
// suite starting at once beside the Apple type-check; a sanitizer run is slower still).
import Foundation
import TaskKit
import TaskKitAsyncHTTPClient
import TaskKitHTTP
import TaskKitLoopbackServer
import TaskKitTestSupport
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("README server quick start")
struct ReadmeServerQuickStartTests {
    @Test func aCacheOfProfilesInFrontOfAnUpstreamLoadsEachIDOnce() async throws {
        try await withHTTPTestServer { server in
            @Sendable func profileURL(of id: String) -> URL { server.url("/profile?user=\(id)") }
            // The README's code.
            let upstream = URLTaskManager(
                interceptors: [HTTPRetryPolicy()],                  // idempotent requests retried with backoff
                transport: AsyncHTTPClientTransport(),              // HTTPClient.shared
                timeout: TestDeadline.scaled(.seconds(30)),
                metricsLabel: "profiles-upstream"                   // through swift-metrics
            )
            let profiles = KeyedMonoTask<String, Data>(
                maximumEntries: 10_000,
                resultExpireDuration: .seconds(60),
                staleWhileRevalidate: .seconds(300),
                metricsLabel: "profiles"
            ) { id in
                try await upstream.data(for: URLRequest(url: profileURL(of: id))).0
            }
            let profile = try await profiles.value(for: "ada")     // in a request handler
            // End of the README's code.
            #expect(!profile.isEmpty)
            // Twenty handlers asking at once while the cached value is fresh: no request.
            let bodies = try await withThrowingTaskGroup(of: Data.self) { group in
                for _ in 0..<20 { group.addTask { try await profiles.value(for: "ada") } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(bodies.count == 20 && bodies.allSatisfy { $0 == profile })
            #expect(await server.hits(.profile) == 1)
            // Twenty handlers asking for a new id at once: one request.
            let others = try await withThrowingTaskGroup(of: Data.self) { group in
                for _ in 0..<20 { group.addTask { try await profiles.value(for: "grace") } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(others).count == 1)
            #expect(await server.hits(.profile) == 2)
        }
    }
}
#endif
