// URLTaskManager under pressure (issue 50): the resilience policies' cost on a healthy host, and
// what they do for a failing one. An in-process SwiftNIO HTTP/1.1 server on 127.0.0.1 (a free
// port; the FlyingFox server HTTPBenchmarks uses took 5.6 ms a request in a trial of this
// workload, with never more than one at a time, which hides the manager's cost) that can be
// switched between healthy (200) and failing (503) and counts, per `Host` header, the requests
// it received and the most it worked on at once. Every manager sends through one
// AsyncHTTPClient (`AsyncHTTPClientTransport`), the peer the manager is measured against.
//
//   swift run -c release HTTPPressure overhead [runs] [seconds]   (default 5 runs of ~6 s)
//   swift run -c release HTTPPressure amplification [seconds]     (default 10 s of 503s)
//   swift run -c release HTTPPressure breaker [seconds]           (default 10 s of 503s, then healthy)
//   swift run -c release HTTPPressure hedging [rounds] [seconds]  (default 3 rounds of 5 s per contender)
//   swift run -c release HTTPPressure serve                       (the server alone, for http-instruction-counts.sh)
//
// - overhead: 8 concurrent callers, each sending GETs one after another, against a healthy host.
//   Contenders (see `overheadContenders`; a new policy is one more line there): the plain client,
//   the manager with every policy off, and the manager with `HostConcurrencyLimit(maximumInFlight:
//   64)` (never reached by 8 callers), a circuit breaker and a retry budget. All managers carry
//   `HTTPRetryPolicy()`. One run = rounds of one wave per contender, the order rotated each round;
//   reported: each contender's time per request over the run, and its ratio to the peer.
// - amplification: the host answers 503 for the whole run; 8 callers with `HTTPRetryPolicy` (3
//   retries, 10 ms exponential backoff with full jitter) loop. Reported: requests that reached the
//   server per caller request, without a budget and with `RetryBudget(ratio: 0.2)`, and the
//   retries' share of the attempts (the budget's promise: ≤ 0.2 + minimumRetries per window).
// - breaker: the host answers 503 for `seconds`, then 200; 8 callers (1 ms pause between calls)
//   with the same retry policy and `CircuitBreakerPolicy(minimumRequests: 10, breakDuration: 1 s)`.
//   Reported: when the circuit opened, the latency of the calls it refused (p50 / p99 / max),
//   the requests that reached the server while failing, and the time from recovery to the first
//   success (the half-open probe that closes the circuit).
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import TaskKit
import TaskKitAsyncHTTPClient
import TaskKitHTTP
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// - hedging: the host answers after 5 ms, one answer in fifty after 100 ms (its p99 is 20x its
//   median); 8 callers loop. Contenders, alternated each round: the manager without hedging and
//   with `HedgingPolicy(delay: 10 ms)` and `RetryBudget(ratio: 0.1)`. Reported: latency p50 / p99 /
//   p99.9 / max of each, and the requests that reached the server per call (hedging's cost).

// MARK: The server

/// What the server saw from one `Host` header.
struct HostCounts: Sendable {
    var requests = 0
    var inFlight = 0
    var mostInFlight = 0
}

final class PressureServer: Sendable {
    /// Whether `GET /work` answers 503.
    let failing = Atomic<Bool>(false)
    /// Whether answers wait: 5 ms, one in fifty 100 ms.
    let tail = Atomic<Bool>(false)
    private let counts = Mutex<[String: HostCounts]>([:])
    private let channel: any Channel
    let port: Int

    private init(channel: any Channel, port: Int) {
        self.channel = channel
        self.port = port
    }

    static func start() async throws -> PressureServer {
        let shared = Mutex<PressureServer?>(nil)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(WorkHandler(server: shared.withLock { $0! }))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = channel.localAddress?.port else { throw ChannelError.unknownLocalAddress }
        let server = PressureServer(channel: channel, port: port)
        shared.withLock { $0 = server }
        return server
    }

    var url: URL { URL(string: "http://127.0.0.1:\(port)/work")! }

    /// A request to `host` arrived (its head); `finished`: the server answered it.
    func began(_ host: String) {
        counts.withLock {
            $0[host, default: HostCounts()].requests += 1
            $0[host]!.inFlight += 1
            $0[host]!.mostInFlight = max($0[host]!.mostInFlight, $0[host]!.inFlight)
        }
    }

    func finished(_ host: String) { counts.withLock { $0[host]!.inFlight -= 1 } }

    /// The counts of every host, and starts them again.
    func takeCounts() -> [String: HostCounts] {
        counts.withLock { counts in
            defer {
                for host in counts.keys { counts[host] = HostCounts(inFlight: counts[host]!.inFlight) }
            }
            return counts
        }
    }

    func requests() -> Int { counts.withLock { $0.values.reduce(0) { $0 + $1.requests } } }
}

/// Answers every request: 503 with an empty body while the server is failing, 200 `ok`
/// otherwise; connections are kept alive.
final class WorkHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let server: PressureServer
    private var host = "?"

    init(server: PressureServer) {
        self.server = server
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            host = head.headers.first(name: "host") ?? "?"
            server.began(host)
        case .body:
            break
        case .end:
            guard server.tail.load(ordering: .relaxed) else {
                respond(context: context)
                return
            }
            let delay: TimeAmount = .milliseconds(Int.random(in: 0..<50) == 0 ? 100 : 5)
            // Scheduled on the channel's own event loop, where the handler and its context live.
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: delay) {
                let (handler, context) = bound.value
                handler.respond(context: context)
            }
        }
    }

    private func respond(context: ChannelHandlerContext) {
        let failing = server.failing.load(ordering: .relaxed)
        var headers = HTTPHeaders()
        headers.add(name: "content-length", value: failing ? "0" : "2")
        let head = HTTPResponseHead(version: .http1_1, status: failing ? .serviceUnavailable : .ok, headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if !failing { context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "ok")))), promise: nil) }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        server.finished(host)
    }
}

// MARK: Contenders

/// Something that sends one GET and returns its status (or throws).
struct Contender: Sendable {
    let name: String
    let send: @Sendable (URL) async throws -> Int
}

func managerContender(_ name: String, _ manager: URLTaskManager) -> Contender {
    Contender(name: name) { url in try await manager.data(for: URLRequest(url: url)).1.statusCode }
}

let client: AsyncHTTPClient.HTTPClient = {
    var configuration = AsyncHTTPClientTransport.recommendedConfiguration
    configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
    // Lives as long as the process.
    return AsyncHTTPClient.HTTPClient(eventLoopGroup: AsyncHTTPClient.HTTPClient.defaultEventLoopGroup, configuration: configuration)
}()

/// A manager over the shared client with `HTTPRetryPolicy(retry:)` and the given policies.
func makeManager(
    retry: RetryCount = HTTPRetryPolicy.defaultRetry,
    hostConcurrency: HostConcurrencyLimit? = nil,
    circuitBreaker: CircuitBreakerPolicy? = nil,
    retryBudget: RetryBudget? = nil,
    rateLimit: HostRateLimit? = nil,
    hedging: HedgingPolicy? = nil
) -> URLTaskManager {
    URLTaskManager(
        interceptors: [HTTPRetryPolicy(retry: retry)], transport: AsyncHTTPClientTransport(client: client),
        hostConcurrency: hostConcurrency, rateLimit: rateLimit, circuitBreaker: circuitBreaker, retryBudget: retryBudget,
        hedging: hedging
    )
}

/// The healthy-host contenders; the first is the peer the others are divided by. A new policy
/// (a rate limit, hedging) is one more line, with the others on as well.
func overheadContenders() -> [Contender] {
    [
        Contender(name: "AsyncHTTPClient") { url in
            let response = try await client.execute(HTTPClientRequest(url: url.absoluteString), timeout: .seconds(60))
            _ = try await response.body.collect(upTo: 1 << 20)
            return Int(response.status.code)
        },
        managerContender("manager, policies off", makeManager()),
        managerContender("manager, limit 64", makeManager(hostConcurrency: HostConcurrencyLimit(maximumInFlight: 64))),
        managerContender(
            "manager, limit 64 + rate 1M/s + breaker + budget + hedging 1 s",
            makeManager(
                hostConcurrency: HostConcurrencyLimit(maximumInFlight: 64),
                circuitBreaker: CircuitBreakerPolicy(), retryBudget: RetryBudget(),
                rateLimit: HostRateLimit(requestsPerSecond: 1_000_000, burst: 1_000), hedging: HedgingPolicy(delay: .seconds(1))
            )
        ),
        managerContender(
            "manager, limit 64 + breaker + budget",
            makeManager(
                hostConcurrency: HostConcurrencyLimit(maximumInFlight: 64),
                circuitBreaker: CircuitBreakerPolicy(), retryBudget: RetryBudget()
            )
        ),
    ]
}

// MARK: Helpers

let callers = 8
let clock = ContinuousClock()

func percentile(_ sorted: [Duration], _ p: Double) -> Duration {
    guard !sorted.isEmpty else { return .zero }
    return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.down)))]
}

func micros(_ duration: Duration) -> String {
    String(format: "%.1f µs", Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12)
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func ratioString(_ value: Double) -> String { String(format: "%.3fx", value) }

/// `callers` concurrent callers, each sending `perCaller` GETs in turn; the wave's duration.
/// Every answer must be a 200.
func wave(_ contender: Contender, url: URL, perCaller: Int) async -> Duration {
    await clock.measure {
        let ok = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<callers {
                group.addTask {
                    var ok = 0
                    for _ in 0..<perCaller where (try? await contender.send(url)) == 200 { ok += 1 }
                    return ok
                }
            }
            return await group.reduce(0, +)
        }
        precondition(ok == callers * perCaller, "HTTPPressure: \(contender.name): only \(ok) of \(callers * perCaller) GETs succeeded")
    }
}

// MARK: Scenarios

func overhead(server: PressureServer, runs: Int, seconds runSeconds: Int) async {
    let contenders = overheadContenders()
    let perCaller = 100
    let requestsPerWave = callers * perCaller
    // Warm-up: connections opened, code paged in.
    for contender in contenders { _ = await wave(contender, url: server.url, perCaller: perCaller) }
    _ = server.takeCounts()
    print("overhead: \(callers) callers x \(perCaller) GETs per wave, healthy host, \(runs) runs")
    var ratios = [[Double]](repeating: [], count: contenders.count)
    var policyRatios: [Double] = []
    for run in 1...runs {
        var totals = [Duration](repeating: .zero, count: contenders.count)
        var waves = 0
        let end = clock.now + .seconds(runSeconds)
        var round = 0
        while clock.now < end || round % contenders.count != 0 {
            // Rotate the order each round so no contender always follows the same one.
            for offset in 0..<contenders.count {
                let index = (round + offset) % contenders.count
                totals[index] += await wave(contenders[index], url: server.url, perCaller: perCaller)
            }
            round += 1
            waves += 1
        }
        let counts = server.takeCounts()
        var line = "run \(run): \(waves) waves each;"
        for (index, contender) in contenders.enumerated() {
            let perRequest = totals[index] / (waves * requestsPerWave)
            let ratio = totals[index] / totals[0]
            ratios[index].append(ratio)
            line += " \(contender.name) \(micros(perRequest))/req (\(ratioString(ratio)))"
            if index > 0 { line += "," }
        }
        line += " limit 64 / policies off: \(ratioString(totals[2] / totals[1]))"
        policyRatios.append(totals[2] / totals[1])
        let most = counts.values.map(\.mostInFlight).max() ?? 0
        print(line + "; most in flight at the server: \(most)")
    }
    for index in 1..<contenders.count {
        let sorted = ratios[index].sorted()
        print("\(contenders[index].name) / AsyncHTTPClient: \(sorted.map(ratioString).joined(separator: " ")) (min–max)")
    }
    let sorted = policyRatios.sorted()
    print("limit 64 / policies off: \(sorted.map(ratioString).joined(separator: " ")) (min–max)")
}

/// 3 retries, 10 ms exponential backoff (full jitter), at most 200 ms.
let pressureRetry = RetryCount.count(
    count: 3,
    intervalProxy: .exponential(initial: .milliseconds(10), scaleRate: 2, maximumDelay: .milliseconds(200), jitter: .full)
)

/// `callers` callers looping until `end`, each call's start, latency and outcome recorded.
struct Call: Sendable {
    let start: ContinuousClock.Instant
    let latency: Duration
    let status: Int?  // nil: an error
    let circuitOpen: Bool
}

func loop(_ manager: URLTaskManager, url: URL, until end: ContinuousClock.Instant, pause: Duration?) async -> [Call] {
    await withTaskGroup(of: [Call].self) { group in
        for _ in 0..<callers {
            group.addTask {
                var calls: [Call] = []
                while clock.now < end {
                    let start = clock.now
                    var status: Int?
                    var circuitOpen = false
                    do {
                        status = try await manager.data(for: URLRequest(url: url)).1.statusCode
                    } catch let error as URLTaskError {
                        if case .circuitOpen = error { circuitOpen = true }
                    } catch {}
                    calls.append(Call(start: start, latency: clock.now - start, status: status, circuitOpen: circuitOpen))
                    if let pause { try? await Task.sleep(for: pause) }
                }
                return calls
            }
        }
        return await group.reduce(into: []) { $0 += $1 }
    }
}

func amplification(server: PressureServer, seconds runSeconds: Int) async {
    print("amplification: host failing (503) for \(runSeconds) s, \(callers) callers, HTTPRetryPolicy 3 retries")
    let budget = RetryBudget(ratio: 0.2)
    let modes: [(String, URLTaskManager)] = [
        ("no budget", makeManager(retry: pressureRetry)),
        ("RetryBudget(ratio: 0.2)", makeManager(retry: pressureRetry, retryBudget: budget)),
    ]
    server.failing.store(true, ordering: .relaxed)
    for (name, manager) in modes {
        _ = server.takeCounts()
        let calls = await loop(manager, url: server.url, until: clock.now + .seconds(runSeconds), pause: nil)
        let counts = server.takeCounts()
        let attempts = counts.values.reduce(0) { $0 + $1.requests }
        let retries = attempts - calls.count
        // The floor: minimumRetries in each window the run touches.
        let windows = Int((Double(runSeconds) / seconds(budget.window)).rounded(.up))
        let bound = budget.ratio + Double(budget.minimumRetries * windows) / Double(attempts)
        print(
            "\(name): \(calls.count) caller requests, \(attempts) reached the server: "
                + String(format: "%.3f per caller request; retries %d = %.3f of attempts", Double(attempts) / Double(calls.count), retries, Double(retries) / Double(attempts))
                + (name == "no budget" ? "" : String(format: " (bound 0.2 + floor = %.3f)", bound))
        )
    }
    server.failing.store(false, ordering: .relaxed)
}

func breaker(server: PressureServer, seconds runSeconds: Int) async {
    let policy = CircuitBreakerPolicy(minimumRequests: 10, window: .seconds(10), breakDuration: .seconds(1), probes: 1)
    print("breaker: host failing (503) for \(runSeconds) s then healthy; \(callers) callers, 1 ms pause, HTTPRetryPolicy 3 retries; breakDuration 1 s, 1 probe")
    let manager = makeManager(retry: pressureRetry, circuitBreaker: policy)
    _ = server.takeCounts()
    server.failing.store(true, ordering: .relaxed)
    let start = clock.now
    let recovery = start + .seconds(runSeconds)
    let recover = Task {
        try? await Task.sleep(until: recovery, clock: clock)
        server.failing.store(false, ordering: .relaxed)
        return server.requests()
    }
    let calls = await loop(manager, url: server.url, until: recovery + .seconds(3), pause: .milliseconds(1))
    let requestsWhileFailing = await recover.value
    let refused = calls.filter(\.circuitOpen)
    let firstRefusal = refused.map { $0.start + $0.latency }.min()
    let latencies = refused.map(\.latency).sorted()
    let failingCalls = calls.filter { $0.start < recovery }.count
    print("calls while failing: \(failingCalls); requests that reached the server meanwhile: \(requestsWhileFailing)")
    if let firstRefusal {
        print(String(format: "circuit opened (first refusal) %.3f s into the outage", seconds(firstRefusal - start)))
    }
    print(
        "refused calls: \(latencies.count); latency p50 \(micros(percentile(latencies, 0.5))), p99 \(micros(percentile(latencies, 0.99))), max \(micros(latencies.last ?? .zero))"
    )
    let firstSuccess = calls.filter { $0.status == 200 && $0.start + $0.latency >= recovery }.map { $0.start + $0.latency }.min()
    if let firstSuccess {
        print(String(format: "host recovered at %d s; first success (the probe that closes the circuit) %.3f s later", runSeconds, seconds(firstSuccess - recovery)))
        let refusedAfter = calls.filter { $0.circuitOpen && $0.start > firstSuccess }.count
        print("refusals after that success: \(refusedAfter)")
    } else {
        print("no success after recovery: the circuit did not close")
    }
}

func hedging(server: PressureServer, rounds: Int, seconds runSeconds: Int) async {
    print("hedging: answers after 5 ms, one in fifty after 100 ms; \(callers) callers; \(rounds) rounds of \(runSeconds) s per contender")
    let contenders: [(String, URLTaskManager)] = [
        ("without hedging", makeManager()),
        (
            "HedgingPolicy(delay: 10 ms), RetryBudget(ratio: 0.1)",
            makeManager(retryBudget: RetryBudget(ratio: 0.1), hedging: HedgingPolicy(delay: .milliseconds(10)))
        ),
    ]
    server.tail.store(true, ordering: .relaxed)
    var latencies = [[Duration]](repeating: [], count: contenders.count)
    var requests = [Int](repeating: 0, count: contenders.count)
    for round in 0..<rounds {
        for offset in contenders.indices {
            let index = (offset + round) % contenders.count
            _ = server.takeCounts()
            let calls = await loop(contenders[index].1, url: server.url, until: clock.now + .seconds(runSeconds), pause: nil)
            requests[index] += server.takeCounts().values.reduce(0) { $0 + $1.requests }
            latencies[index] += calls.map(\.latency)
        }
    }
    server.tail.store(false, ordering: .relaxed)
    for (index, contender) in contenders.enumerated() {
        let sorted = latencies[index].sorted()
        print(
            "\(contender.0): \(sorted.count) calls; p50 \(micros(percentile(sorted, 0.5))), p99 \(micros(percentile(sorted, 0.99))), "
                + "p99.9 \(micros(percentile(sorted, 0.999))), max \(micros(sorted.last ?? .zero)); "
                + String(format: "%.4f requests per call", Double(requests[index]) / Double(sorted.count))
        )
    }
    let p99 = latencies.map { percentile($0.sorted(), 0.99) }
    print("p99 with hedging / without: " + ratioString(seconds(p99[1]) / seconds(p99[0])))
}

// MARK: Main

let arguments = CommandLine.arguments.dropFirst()
let scenario = arguments.first ?? ""
let numbers = arguments.dropFirst().compactMap(Int.init)
let server = try await PressureServer.start()
switch scenario {
case "overhead":
    await overhead(server: server, runs: numbers.first ?? 5, seconds: numbers.dropFirst().first ?? 6)
case "amplification":
    await amplification(server: server, seconds: numbers.first ?? 10)
case "breaker":
    await breaker(server: server, seconds: numbers.first ?? 10)
case "hedging":
    await hedging(server: server, rounds: numbers.first ?? 3, seconds: numbers.dropFirst().first ?? 5)
case "serve":
    // The healthy server in a process of its own, so that callgrind counts only the client
    // (`http-instruction-counts.sh` with an `ahc` workload); it runs until it is killed.
    FileHandle.standardOutput.write(Data((server.url.absoluteString + "\n").utf8))
    while true { try await Task.sleep(for: .seconds(3_600)) }
default:
    print("usage: HTTPPressure overhead [runs] [seconds] | amplification [seconds] | breaker [seconds] | hedging [rounds] [seconds] | serve")
    exit(2)
}
