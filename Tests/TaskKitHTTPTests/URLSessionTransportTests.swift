#if Examples
import Foundation
import TaskKitLoopbackServer
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP
import TaskKitTestSupport

@Suite("URLSessionTransport")
struct URLSessionTransportTests {
    @Test("the default configuration has no URL cache")
    func defaultConfigurationHasNoCache() {
        #expect(URLSessionTransport.defaultConfiguration.urlCache == nil)
        #expect(URLSessionTransport().session.configuration.urlCache == nil)
    }

    @Test("a configuration's URL cache is dropped where the platform needs it (Linux), and the caller's object is left alone")
    func configurationCache() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = URLCache(memoryCapacity: 1 << 20, diskCapacity: 0, diskPath: nil)
        let transport = URLSessionTransport(configuration: configuration)
        #expect((transport.session.configuration.urlCache == nil) == URLSessionTransport.dropsURLCache)
        #expect(configuration.urlCache != nil)
    }

    /// FoundationNetworking traps ("Trying to access a behaviour for a task that in not in the
    /// registry") when a request of a session with a URL cache is cancelled while the cache
    /// lookup runs. The transport is given a cache-enabled configuration on purpose: it must drop
    /// the cache, or this test crashes the test process (it did, 16 runs in 40, in the demo's
    /// search-as-you-type scenario before the fix). It also caught a deadlock of FoundationNetworking's
    /// `URLSession.data(for:)` under cancellation (2 runs in 3 hung), which is why the transport
    /// uses `dataTask(with:completionHandler:)`; the time limit turns a hang into a failure.
    @Test(
        "cancelling requests right after they start never traps or hangs, even if the configuration has a cache",
        .scaledTimeLimit(minutes: 1)
    )
    func cancelStorm() async throws {
        try await withHTTPTestServer { server in
            let configuration = URLSessionConfiguration.ephemeral
            configuration.urlCache = URLCache(memoryCapacity: 1 << 20, diskCapacity: 0, diskPath: nil)
            // 400 requests queue for a few connections: on a loaded machine the last wait longer
            // than the default 60 s. The test's time limit, not the request's, catches a hang.
            configuration.timeoutIntervalForRequest = 3600
            let transport = URLSessionTransport(configuration: configuration)
            let outcomes = await withTaskGroup(of: String?.self) { group in
                for index in 0..<400 {
                    group.addTask {
                        let request = Task {
                            try await transport.send(URLRequest(url: server.url("/search?q=\(index)")))
                        }
                        // Cancel at a varying point: before the send, during the cache lookup, in
                        // flight, or after the response.
                        for _ in 0..<(index % 40) { await Task.yield() }
                        request.cancel()
                        switch await request.result {
                        case .success: return nil
                        case .failure(let error as URLError) where error.code == .cancelled: return nil
                        case .failure(let error) where error is CancellationError: return nil
                        case .failure(let error): return "request \(index): \(error)"
                        }
                    }
                }
                return await group.reduce(into: [String?]()) { $0.append($1) }
            }
            #expect(outcomes.count == 400)
            let unexpected = outcomes.compactMap { $0 }
            #expect(unexpected.isEmpty, "every request either succeeded or was cancelled: \(unexpected.prefix(5))")
        }
    }
}
#endif
