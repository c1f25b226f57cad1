#if Examples
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TaskKitLoopbackServer

/// One workload run twice, the same callers against the same server: the naive way (each caller
/// does its own request and handles its own result: no single-flight, no coalescing, no shared
/// token refresh, no cancelling of outdated work) and through TaskKit. What is counted is what the
/// upstream server received, or for a UI workload the results handled.
struct Comparison: Codable, Sendable {
    struct Run: Codable, Sendable {
        /// Requests the server received for the counted endpoint, or results handled.
        let count: Int
        let seconds: Double
    }

    let scenario: String
    let workload: String
    /// What `count` counts, such as `GET /profile`.
    let counted: String
    let naive: Run
    let taskKit: Run
}

/// Runs `work` and returns what the server received on `counted` meanwhile, and the wall time.
func measuredRun(
    _ server: LoopbackServer, counting counted: @escaping @Sendable (LoopbackServer) async -> Int,
    _ work: () async throws -> Void
) async rethrows -> Comparison.Run {
    let before = await counted(server)
    let start = ContinuousClock.now
    try await work()
    let elapsed = start.duration(to: .now)
    return Comparison.Run(count: await counted(server) - before, seconds: elapsed.seconds)
}

extension DemoContext {
    /// The naive client of a protected resource: each request that gets a 401 fetches a token of
    /// its own and tries again once. Returns the final status.
    func naiveProtectedGet(token: String) async throws -> Int {
        func get(_ token: String) async throws -> Int {
            var request = URLRequest(url: server.url("/protected"))
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            let (_, response) = try await Self.session.data(for: request)
            return (response as? HTTPURLResponse)?.statusCode ?? 0
        }
        let status = try await get(token)
        guard status == 401 else { return status }
        struct TokenResponse: Decodable { let access_token: String }
        let (data, _) = try await fetch("/token", method: "POST")
        return try await get(JSONDecoder().decode(TokenResponse.self, from: data).access_token)
    }
}
#endif
