#if Examples
import Foundation
import MetricsTestKit
import TaskKit
import TaskKitLoopbackServer
import TaskKitTestSupport
import TaskKitTesting
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP

/// A transport that holds every request at a gate before sending it, and counts what it was
/// asked to send and what was cancelled while held.
final class HTTPTestGatedTransport: HTTPTransport {
    let inner: any HTTPTransport
    let gate = TestGate()
    private let counts = LockedState((sent: 0, cancelled: 0))

    init(_ inner: any HTTPTransport) { self.inner = inner }

    var sent: Int { counts.withLock { $0.sent } }
    var cancelled: Int { counts.withLock { $0.cancelled } }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        counts.withLock { $0.sent += 1 }
        await gate.waitOrCancel()
        if Task.isCancelled {
            counts.withLock { $0.cancelled += 1 }
            throw URLError(.cancelled)
        }
        return try await inner.send(request)
    }
}

/// `URLTaskManager(coalescing:)` against the loopback server, over both transports.
@Suite("URLTaskManager coalescing against a loopback server", .serialized, .scaledTimeLimit(minutes: 2))
struct URLTaskManagerCoalescingTests {
    func manager(
        _ transport: any HTTPTransport, interceptors: [any URLTaskInterceptor] = [], clock: any Clock<Duration> = ContinuousClock(),
        metricsLabel: String? = nil
    ) -> URLTaskManager {
        URLTaskManager(
            interceptors: interceptors, transport: transport, timeout: .seconds(60), coalescing: .standard,
            clock: clock, metricsLabel: metricsLabel
        )
    }

    /// Waits until the manager's flights hold `count` callers.
    func callers(_ manager: URLTaskManager, _ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
        await eventually("\(count) callers wait", pollingEvery: .milliseconds(2), sourceLocation: sourceLocation) {
            manager.coalescer?.waitingCallers == count
        }
    }

    @Test("50 identical GETs in flight make one request; every caller gets the same response", arguments: HTTPTestTransport.allCases)
    func fiftyCallersOneRequest(_ transport: HTTPTestTransport) async throws {
        _ = processTestMetrics
        let label = "coalescing-\(transport.rawValue)"
        try await withHTTPTestServer { server in
            let gated = HTTPTestGatedTransport(transport.make())
            let manager = manager(gated, metricsLabel: label)
            let url = server.url("/search?q=coalesced")
            let callers = (0..<50).map { _ in Task { try await manager.data(for: URLRequest(url: url)) } }
            await self.callers(manager, 50)
            gated.gate.open()
            var bodies = Set<Data>()
            for caller in callers {
                let (data, response) = try await caller.boundedValue()
                #expect(response.statusCode == 200)
                bodies.insert(data)
            }
            #expect(bodies.count == 1)
            #expect(gated.sent == 1)
            #expect(await server.hits(.search) == 1)
            #expect(manager.coalescer?.flightCount == 0)
            #expect(processTestMetrics.counterTotal(label: "taskkit_http_coalesced_requests", dimensions: [("name", label)]) == 49)
            // Nothing is cached: a request after the flight ended makes a new one.
            _ = try await manager.data(for: URLRequest(url: url))
            #expect(await server.hits(.search) == 2)
        }
    }

    @Test("joined callers get the flight's error, not a stand-in", arguments: HTTPTestTransport.allCases)
    func errorIsShared(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let gated = HTTPTestGatedTransport(transport.make())
            let manager = manager(gated)
            let url = server.misbehavingURL(.closedBeforeReply)
            let callers = (0..<10).map { _ in Task { try await manager.data(for: URLRequest(url: url)) } }
            await self.callers(manager, 10)
            gated.gate.open()
            for caller in callers {
                let error = await #expect(throws: URLError.self) { _ = try await caller.boundedValue() }
                #expect(error?.code == .networkConnectionLost)
            }
            #expect(await server.hits(.misbehaving) == 1)
        }
    }

    @Test("a cancelled caller leaves at once; the others keep the flight; the last one leaving cancels it", arguments: HTTPTestTransport.allCases)
    func cancellation(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let gated = HTTPTestGatedTransport(transport.make())
            let manager = manager(gated)
            let url = server.url("/hello")
            let first = Task { try await manager.data(for: URLRequest(url: url)) }
            let second = Task { try await manager.data(for: URLRequest(url: url)) }
            await callers(manager, 2)
            await eventually("the flight reached the transport", pollingEvery: .milliseconds(2)) { gated.sent == 1 }
            first.cancel()  // the caller that started the flight
            await #expect(throws: CancellationError.self) { _ = try await first.boundedValue() }
            #expect(gated.cancelled == 0, "the flight goes on for the caller that remains")
            second.cancel()
            await #expect(throws: CancellationError.self) { _ = try await second.boundedValue() }
            #expect(
                await eventually("the flight is cancelled", pollingEvery: .milliseconds(2)) { gated.cancelled == 1 },
                "the last caller left, but the transport call was not cancelled"
            )
            // A new caller starts a new flight (it never joins the cancelled one).
            gated.gate.open()
            let (_, response) = try await manager.data(for: URLRequest(url: url))
            #expect(response.statusCode == 200)
            #expect(gated.sent == 2)
            #expect(await server.hits(.hello) == 1)
        }
    }

    @Test("a caller arriving while the flight is being cancelled waits for it to end, then starts the next one")
    func callerAfterAbandonment() async throws {
        try await withHTTPTestServer { server in
            // A transport whose cancelled send takes until the test lets it end.
            let ending = TestGate()
            let gated = HTTPTestGatedTransport(HTTPTestTransport.urlSession.make())
            let slowCancel = HTTPTestSlowCancelTransport(gated, ending: ending)
            let manager = manager(slowCancel)
            let url = server.url("/hello")
            let abandoned = Task { try await manager.data(for: URLRequest(url: url)) }
            await callers(manager, 1)
            await eventually("the flight reached the transport", pollingEvery: .milliseconds(2)) { gated.sent == 1 }
            abandoned.cancel()
            await #expect(throws: CancellationError.self) { _ = try await abandoned.boundedValue() }
            await eventually(pollingEvery: .milliseconds(2)) { gated.cancelled == 1 }
            let late = Task { try await manager.data(for: URLRequest(url: url)) }
            await callers(manager, 1)
            #expect(gated.sent == 1, "a second flight started while the first was still ending")
            gated.gate.open()
            ending.open()
            let (_, response) = try await late.boundedValue()
            #expect(response.statusCode == 200)
            #expect(gated.sent == 2)
        }
    }

    @Test("each caller keeps its own deadline; the flight outlives the callers that gave up")
    func perCallerTimeout() async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let gated = HTTPTestGatedTransport(HTTPTestTransport.urlSession.make())
            let manager = manager(gated, clock: clock)
            let url = server.url("/hello")
            let patient = Task { try await manager.data(for: URLRequest(url: url), timeout: .seconds(30)) }
            await callers(manager, 1)
            let hasty = Task { try await manager.data(for: URLRequest(url: url), timeout: .seconds(1)) }
            await callers(manager, 2)
            await eventually(pollingEvery: .milliseconds(2)) { clock.sleeperCount == 2 }
            clock.advance(by: .seconds(1))
            let error = await #expect(throws: TaskError.self) { _ = try await hasty.boundedValue() }
            #expect(error.map { "\($0)" } == "TaskError.timedOut")
            #expect(gated.cancelled == 0)
            gated.gate.open()
            let status = try await patient.boundedValue().1.statusCode
            #expect(status == 200)
        }
    }

    @Test("requests that differ in credentials, or are not eligible, never share", arguments: HTTPTestTransport.allCases)
    func notShared(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let gated = HTTPTestGatedTransport(transport.make())
            let manager = manager(gated)
            var alice = URLRequest(url: server.url("/headers"))
            alice.setValue("Bearer alice", forHTTPHeaderField: "Authorization")
            var bob = alice
            bob.setValue("Bearer bob", forHTTPHeaderField: "Authorization")
            var post = URLRequest(url: server.url("/analytics"))
            post.httpMethod = "POST"
            post.httpBody = Data("[]".utf8)
            var fresh = URLRequest(url: server.url("/headers"))
            fresh.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
            let requests = [alice, bob, post, post, fresh, fresh]
            let callers = requests.map { request in Task { try await manager.data(for: request) } }
            await eventually(pollingEvery: .milliseconds(2)) { gated.sent == 6 }
            gated.gate.open()
            let bodies = try await callers.asyncMap { try await $0.boundedValue().0 }
            #expect(String(decoding: bodies[0], as: UTF8.self).contains("Bearer alice"))
            #expect(String(decoding: bodies[1], as: UTF8.self).contains("Bearer bob"))
            #expect(await server.hits(.headers) == 4)
            #expect(await server.hits(.analytics) == 2)
        }
    }

    @Test("the flight's retries run once for every caller", arguments: HTTPTestTransport.allCases)
    func retriesRunOnce(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let gated = HTTPTestGatedTransport(transport.make())
            let policy = HTTPRetryPolicy(retry: .count(count: 3, intervalProxy: .fixed(.zero)))
            let manager = manager(gated, interceptors: [policy])
            let url = server.url("/flaky?key=coalesced")  // 503 twice, then 200
            let callers = (0..<10).map { _ in Task { try await manager.data(for: URLRequest(url: url)) } }
            await self.callers(manager, 10)
            gated.gate.open()
            for caller in callers {
                let status = try await caller.boundedValue().1.statusCode
                #expect(status == 200)
            }
            #expect(await server.hits(.flaky) == 3)
        }
    }
}

/// Lets a cancelled send end only when `ending` opens, as a transport whose cancellation takes
/// time to reach the network.
final class HTTPTestSlowCancelTransport: HTTPTransport {
    let inner: any HTTPTransport
    let ending: TestGate

    init(_ inner: any HTTPTransport, ending: TestGate) {
        self.inner = inner
        self.ending = ending
    }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        do {
            return try await inner.send(request)
        } catch {
            await ending.wait()
            throw error
        }
    }
}

extension Array where Element: Sendable {
    /// `transform` of each element, in order.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}

/// Tags each attempt with its flight (the `URLTask`'s request id), for the server to record.
struct HTTPTestFlightTagger: URLTaskInterceptor {
    func adapt(_ request: URLRequest, for task: URLTask, context: URLTaskContext) async throws -> URLRequest {
        var request = request
        request.setValue(String(task.requestID), forHTTPHeaderField: "X-Flight")
        return request
    }
}

@Suite("URLTaskManager coalescing under stress", .serialized, .scaledTimeLimit(minutes: 4))
struct URLTaskManagerCoalescingStressTests {
    /// What one caller did and saw.
    enum Outcome: Sendable {
        case answered(flight: String)
        case cancelled
        case failed(String)
    }

    @Test(
        "10,000 callers over 20 keys (joining, cancelled at random points, failing and retried): two flights that answered callers never overlap at the server, every caller not cancelled gets its flight's answer",
        arguments: HTTPTestTransport.allCases
    )
    func stress(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(
                interceptors: [
                    HTTPTestFlightTagger(),
                    HTTPRetryPolicy(retry: .count(count: 2, intervalProxy: .fixed(.zero))),
                ],
                transport: transport.make(), timeout: TestDeadline.scaled(.seconds(60)), coalescing: .standard
            )
            // Keys 0–14 answer at once; 15–19 fail each flight's first attempt (503, retried).
            let urls = (0..<20).map { key in
                server.keepAliveURL("flight?key=\(key)&ms=\(1 + key % 3)" + (key >= 15 ? "&fail=1" : ""))
            }
            var generator = SeededRandomNumberGenerator(seed: 0x5EED_0034)
            let plan = (0..<10_000).map { _ in
                (key: Int.random(in: 0..<20, using: &generator),
                 cancelAfter: Bool.random(using: &generator) && Int.random(in: 0..<4, using: &generator) == 0
                    ? Int.random(in: 0...4_000, using: &generator) : nil)
            }
            var outcomes: [Outcome] = []
            outcomes.reserveCapacity(plan.count)
            // At most 200 callers at a time.
            for batch in stride(from: 0, to: plan.count, by: 200) {
                let slice = plan[batch..<min(batch + 200, plan.count)]
                let results = await withTaskGroup(of: Outcome.self) { group in
                    for step in slice {
                        group.addTask {
                            let caller = Task { try await manager.data(for: URLRequest(url: urls[step.key])) }
                            if let microseconds = step.cancelAfter {
                                try? await Task.sleep(for: .microseconds(microseconds))
                                caller.cancel()
                            }
                            switch await Result(catching: { try await caller.boundedValue() }) {
                            case .success(let (data, response)) where response.statusCode == 200:
                                return .answered(flight: String(decoding: data, as: UTF8.self))
                            case .success(let (_, response)):
                                return .failed("status \(response.statusCode)")
                            case .failure(is CancellationError) where step.cancelAfter != nil:
                                return .cancelled
                            case .failure(let error):
                                return .failed("\(error)")
                            }
                        }
                    }
                    return await group.reduce(into: [Outcome]()) { $0.append($1) }
                }
                outcomes += results
            }
            let failures = outcomes.compactMap { if case .failed(let why) = $0 { why } else { nil } }
            #expect(failures.isEmpty, "\(failures.count) callers failed, e.g. \(failures.prefix(3))")
            let answered = Set(outcomes.compactMap { if case .answered(let flight) = $0 { flight } else { nil } })
            let cancelled = outcomes.filter { if case .cancelled = $0 { true } else { false } }.count
            #expect(cancelled > 100, "the plan cancels about one caller in eight")
            // Every answered flight's attempts, by key: none may overlap another's.
            let intervals = await server.flightIntervals().filter { answered.contains($0.flight) }
            var overlaps: [String] = []
            for (key, byKey) in Dictionary(grouping: intervals, by: \.key) {
                let sorted = byKey.sorted { $0.start < $1.start }
                for (earlier, later) in zip(sorted, sorted.dropFirst()) where later.start < earlier.end && later.flight != earlier.flight {
                    overlaps.append("key \(key): flights \(earlier.flight) and \(later.flight)")
                }
            }
            #expect(overlaps.isEmpty, "\(overlaps.count) overlapping flights, e.g. \(overlaps.prefix(3))")
            // Coalescing happened: far fewer flights than callers.
            #expect(answered.count < outcomes.count / 4, "\(answered.count) flights for \(outcomes.count) callers")
            #expect(manager.coalescer?.flightCount == 0)
        }
    }
}
#endif
