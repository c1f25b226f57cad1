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
// - "Coalescing: ...": `URLTaskManager(coalescing: .standard)` over AsyncHTTPClient against
//   `GET /upstream`, which answers after 20 ms (an upstream's latency) and counts its requests.
//   One sample of "1,000 identical GETs" sends 1,000 concurrent identical requests and checks that
//   exactly one reached the server; "one GET" sends one. The paired benchmark records the 1,000
//   callers' time in percent of one request's. A joined caller's own cost is the difference
//   divided by 999 (time) and the sample's mallocs divided by 1,000; compare it with a caller of
//   the plain manager answered from memory (the "... over AsyncHTTPClient: 640 GETs" wave / 640).
//
// Run: cd Benchmarks && swift package --disable-sandbox benchmark --target HTTPBenchmarks
import AsyncHTTPClient
import Benchmark
import FlyingFox
import FlyingSocks
import Foundation
import NIOCore
import Synchronization
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
        /// `GET /upstream`, answered after 20 ms.
        let upstreamURL: URL
        let coalescingManager: URLTaskManager
    }

    /// The requests `GET /upstream` has received.
    static let upstreamRequests = Atomic<Int>(0)

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
        await server.appendRoute("GET /upstream") { _ in
            HTTPBenchFixtureStore.upstreamRequests.wrappingAdd(1, ordering: .relaxed)
            try await Task.sleep(for: .milliseconds(20))
            return HTTPResponse(statusCode: .ok, body: Data("upstream".utf8))
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
        let coalescingManager = URLTaskManager(
            transport: AsyncHTTPClientTransport(client: client), coalescing: .standard
        )
        let fixture = Fixture(
            url: url, session: URLSession(configuration: configuration), manager: manager,
            client: client, clientManager: clientManager,
            upstreamURL: URL(string: "http://127.0.0.1:\(port)/upstream")!, coalescingManager: coalescingManager
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

/// `callers` concurrent identical GETs of `/upstream` through the coalescing manager; checks
/// that every caller got the answer and that exactly one request reached the server.
func coalescedBurst(_ fixture: HTTPBenchFixtureStore.Fixture, callers: Int) async {
    let before = HTTPBenchFixtureStore.upstreamRequests.load(ordering: .relaxed)
    let ok = await withTaskGroup(of: Bool.self) { group in
        for _ in 0..<callers {
            group.addTask {
                (try? await fixture.coalescingManager.data(for: URLRequest(url: fixture.upstreamURL)).1.statusCode) == 200
            }
        }
        return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
    }
    let requests = HTTPBenchFixtureStore.upstreamRequests.load(ordering: .relaxed) - before
    precondition(ok == callers, "HTTPBenchmarks: only \(ok) of \(callers) coalesced callers succeeded")
    precondition(requests == 1, "HTTPBenchmarks: \(callers) identical GETs made \(requests) requests, not 1")
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

    Benchmark("Coalescing: 1,000 concurrent identical GETs (20 ms upstream)", configuration: configuration) { benchmark in
        let fixture = try await HTTPBenchFixtureStore.shared.get()
        benchmark.startMeasurement()
        await coalescedBurst(fixture, callers: 1_000)
        benchmark.stopMeasurement()
    }
    Benchmark("Coalescing: one GET (20 ms upstream)", configuration: configuration) { benchmark in
        let fixture = try await HTTPBenchFixtureStore.shared.get()
        benchmark.startMeasurement()
        await coalescedBurst(fixture, callers: 1)
        benchmark.stopMeasurement()
    }
    Benchmark("Coalescing: 1,000 identical GETs / one GET, paired", configuration: paired) { benchmark in
        let fixture = try await HTTPBenchFixtureStore.shared.get()
        let percent = await pairedPercent(
            plain: { await coalescedBurst(fixture, callers: 1) },
            managed: { await coalescedBurst(fixture, callers: 1_000) }
        )
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
/// the managed side's total time in percent of the plain side's. Each wave's answers are checked.
func pairedOverhead(plain plainWave: () async -> Int, managed managedWave: () async -> Int) async throws -> Int {
    await pairedPercent(plain: { checkWave(await plainWave()) }, managed: { checkWave(await managedWave()) })
}

/// `managed`'s time in percent of `plain`'s: two runs of each, in alternating order.
func pairedPercent(plain: () async -> Void, managed: () async -> Void) async -> Int {
    let clock = ContinuousClock()
    var plainTime = Duration.zero
    var managedTime = Duration.zero
    for round in 0..<2 {
        if round == 0 {
            plainTime += await clock.measure { await plain() }
            managedTime += await clock.measure { await managed() }
        } else {
            managedTime += await clock.measure { await managed() }
            plainTime += await clock.measure { await plain() }
        }
    }
    return Int((managedTime / plainTime * 100).rounded())
}
