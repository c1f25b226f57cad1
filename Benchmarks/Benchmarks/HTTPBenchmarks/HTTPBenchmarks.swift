// URLTaskManager (bearer authenticator + retry policy) against the plain client it sends through,
// over each transport: URLSession, and AsyncHTTPClient (`AsyncHTTPClientTransport`). Same
// process, same loopback server, 64 concurrent requests.
//
// The server is a FlyingFox server on 127.0.0.1 (a free port) started once, in this process:
// `GET /protected` answers 200 with a short body when the request carries the expected bearer
// token, 401 otherwise. Both sides use an ephemeral URLSession without a URL cache
// (`URLSessionTransport.defaultConfiguration`) that is created once and kept warm (connections
// reused), and the same request. The AsyncHTTPClient side: one `HTTPClient` with the transport's
// recommended configuration and up to 64 connections per host, shared by the plain waves and the
// manager's transport.
//
// - "URLSession" / "URLTaskManager": one sample = 64 concurrent workers, each sending
//   `requestsPerWorker` requests one after another (64 x 10 = 640 requests). Divide the
//   malloc count by 640 for mallocs per request; requests per second = 640 / wall clock.
// - "AsyncHTTPClient" / "URLTaskManager over AsyncHTTPClient": the same, over AsyncHTTPClient.
// - "URLTaskManager / URLSession, paired" (and "... over AsyncHTTPClient / AsyncHTTPClient,
//   paired"): one sample runs one wave of each (alternating which
//   goes first) and records the ratio of their durations in percent (custom metric
//   `overhead %`: 100 = same speed, 110 = 10% slower). Pairing each wave with its baseline
//   cancels out most of the noise of a shared machine; read its median and spread.
//
// Run: cd Benchmarks && swift package --disable-sandbox benchmark --target HTTPBenchmarks
import AsyncHTTPClient
import Benchmark
import FlyingFox
import FlyingSocks
import Foundation
import NIOCore
import TaskKit
import TaskKitAsyncHTTPClient
import TaskKitHTTP
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let concurrentRequests = 64
let requestsPerWorker = 10
let benchToken = "benchmark-token"

/// The server, the session and the manager, created once per process.
actor HTTPBenchFixtureStore {
    static let shared = HTTPBenchFixtureStore()

    struct Fixture: Sendable {
        let url: URL
        let session: URLSession
        let manager: URLTaskManager
        let client: AsyncHTTPClient.HTTPClient
        let clientManager: URLTaskManager
    }

    private var fixture: Fixture?
    private var server: HTTPServer?

    func get() async throws -> Fixture {
        if let fixture { return fixture }
        let server = HTTPServer(address: try .inet(ip4: "127.0.0.1", port: 0), timeout: 30, logger: .disabled)
        await server.appendRoute("GET /protected") { request in
            guard request.headers[.authorization] == "Bearer \(benchToken)" else {
                return HTTPResponse(statusCode: .unauthorized)
            }
            return HTTPResponse(statusCode: .ok, body: Data("hello".utf8))
        }
        Task { try await server.run() }
        try await server.waitUntilListening(timeout: 10)
        guard case .ip4(_, let port)? = await server.listeningAddress else { throw SocketError.unsupportedAddress }
        let url = URL(string: "http://127.0.0.1:\(port)/protected")!

        // Both sides without a URL cache (URLTaskManager's transport always drops it on Linux).
        let configuration = URLSessionTransport.defaultConfiguration
        configuration.httpMaximumConnectionsPerHost = concurrentRequests
        let authenticator = BearerTokenAuthenticator(credential: BearerCredential(accessToken: benchToken)) { _, _ in
            BearerCredential(accessToken: benchToken)
        }
        let manager = URLTaskManager(
            interceptors: [authenticator, HTTPRetryPolicy()], transport: URLSessionTransport(configuration: configuration)
        )
        var clientConfiguration = AsyncHTTPClientTransport.recommendedConfiguration
        clientConfiguration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = concurrentRequests
        // Lives as long as the process (benchmarks never end it early), so it is never shut down.
        let client = AsyncHTTPClient.HTTPClient(
            eventLoopGroup: AsyncHTTPClient.HTTPClient.defaultEventLoopGroup, configuration: clientConfiguration
        )
        let clientManager = URLTaskManager(
            interceptors: [authenticator, HTTPRetryPolicy()], transport: AsyncHTTPClientTransport(client: client)
        )
        let fixture = Fixture(
            url: url, session: URLSession(configuration: configuration), manager: manager,
            client: client, clientManager: clientManager
        )
        self.server = server
        self.fixture = fixture
        return fixture
    }
}

/// 64 workers, each sending `requestsPerWorker` requests in turn; returns how many got 200.
func httpBenchWave(_ send: @escaping @Sendable () async throws -> Int) async -> Int {
    await withTaskGroup(of: Int.self) { group in
        for _ in 0..<concurrentRequests {
            group.addTask {
                var ok = 0
                for _ in 0..<requestsPerWorker where (try? await send()) == 200 { ok += 1 }
                return ok
            }
        }
        return await group.reduce(0, +)
    }
}

func plainWave(_ fixture: HTTPBenchFixtureStore.Fixture) async -> Int {
    await httpBenchWave {
        var request = URLRequest(url: fixture.url)
        request.setValue("Bearer \(benchToken)", forHTTPHeaderField: "Authorization")
        let (_, response) = try await fixture.session.data(for: request)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }
}

func managedWave(_ fixture: HTTPBenchFixtureStore.Fixture) async -> Int {
    await httpBenchWave {
        try await fixture.manager.data(for: URLRequest(url: fixture.url)).1.statusCode
    }
}

func plainClientWave(_ fixture: HTTPBenchFixtureStore.Fixture) async -> Int {
    await httpBenchWave {
        var request = HTTPClientRequest(url: fixture.url.absoluteString)
        request.headers.add(name: "Authorization", value: "Bearer \(benchToken)")
        let response = try await fixture.client.execute(request, timeout: .seconds(60))
        _ = try await response.body.collect(upTo: 1 << 20)
        return Int(response.status.code)
    }
}

func managedClientWave(_ fixture: HTTPBenchFixtureStore.Fixture) async -> Int {
    await httpBenchWave {
        try await fixture.clientManager.data(for: URLRequest(url: fixture.url)).1.statusCode
    }
}

func checkWave(_ ok: Int) {
    precondition(ok == concurrentRequests * requestsPerWorker, "HTTPBenchmarks: only \(ok) requests succeeded")
}

let overheadMetric = BenchmarkMetric.custom("overhead %", polarity: .prefersSmaller, useScalingFactor: false)

let benchmarks: @Sendable () -> Void = {
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, .cpuTotal],
        warmupIterations: 3,
        scalingFactor: .one,
        maxDuration: .seconds(10),
        maxIterations: 60
    )

    let waves: [(name: String, wave: @Sendable (HTTPBenchFixtureStore.Fixture) async -> Int)] = [
        ("URLSession: 64 concurrent, 640 GETs", plainWave),
        ("URLTaskManager (auth + retry): 64 concurrent, 640 GETs", managedWave),
        ("AsyncHTTPClient: 64 concurrent, 640 GETs", plainClientWave),
        ("URLTaskManager (auth + retry) over AsyncHTTPClient: 64 concurrent, 640 GETs", managedClientWave),
    ]
    for (name, wave) in waves {
        Benchmark(name, configuration: configuration) { benchmark in
            let fixture = try await HTTPBenchFixtureStore.shared.get()
            benchmark.startMeasurement()
            let ok = await wave(fixture)
            benchmark.stopMeasurement()
            checkWave(ok)
        }
    }

    let paired = Benchmark.Configuration(
        metrics: [overheadMetric],
        warmupIterations: 2,
        scalingFactor: .one,
        maxDuration: .seconds(20),
        maxIterations: 40
    )
    Benchmark("URLTaskManager / URLSession, paired waves", configuration: paired) { benchmark in
        let fixture = try await HTTPBenchFixtureStore.shared.get()
        let percent = try await pairedOverhead(plain: { await plainWave(fixture) }, managed: { await managedWave(fixture) })
        benchmark.measurement(overheadMetric, percent)
    }

    Benchmark("URLTaskManager over AsyncHTTPClient / AsyncHTTPClient, paired waves", configuration: paired) { benchmark in
        let fixture = try await HTTPBenchFixtureStore.shared.get()
        let percent = try await pairedOverhead(
            plain: { await plainClientWave(fixture) }, managed: { await managedClientWave(fixture) }
        )
        benchmark.measurement(overheadMetric, percent)
    }
}

/// Two waves of each side, in alternating order so neither always runs on a warmer machine;
/// the managed side's total time in percent of the plain side's.
func pairedOverhead(plain plainWave: () async -> Int, managed managedWave: () async -> Int) async throws -> Int {
    let clock = ContinuousClock()
    var plain = Duration.zero
    var managed = Duration.zero
    for round in 0..<2 {
        if round == 0 {
            plain += try await clock.measureWave(plainWave)
            managed += try await clock.measureWave(managedWave)
        } else {
            managed += try await clock.measureWave(managedWave)
            plain += try await clock.measureWave(plainWave)
        }
    }
    return Int((managed / plain * 100).rounded())
}

extension ContinuousClock {
    func measureWave(_ wave: () async -> Int) async throws -> Duration {
        let start = now
        let ok = await wave()
        let elapsed = start.duration(to: now)
        checkWave(ok)
        return elapsed
    }
}
