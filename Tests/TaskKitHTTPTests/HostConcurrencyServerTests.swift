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

/// A transport that forwards to another and counts the sends in flight to each host, and the
/// most there were at once.
final class HTTPTestConcurrencyTransport: HTTPTransport {
    let inner: any HTTPTransport
    private let counts = LockedState((inFlight: [String: Int](), peak: [String: Int](), sent: 0))

    init(_ inner: any HTTPTransport) { self.inner = inner }

    var sent: Int { counts.withLock { $0.sent } }
    func peak(_ host: String) -> Int { counts.withLock { $0.peak[host, default: 0] } }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let host = HostConcurrencyLimit.host(of: request.url) ?? "-"
        counts.withLock { counts in
            counts.sent += 1
            counts.inFlight[host, default: 0] += 1
            counts.peak[host] = max(counts.peak[host, default: 0], counts.inFlight[host]!)
        }
        defer { counts.withLock { $0.inFlight[host]! -= 1 } }
        return try await inner.send(request)
    }
}

/// `URLTaskManager(hostConcurrency:)` against the loopback server, over both transports.
@Suite("URLTaskManager host concurrency against a loopback server", .serialized, .scaledTimeLimit(minutes: 3))
struct HostConcurrencyServerTests {
    /// Starts `request` in a task of its own.
    func caller(_ manager: URLTaskManager, _ url: URL, timeout: Duration? = nil) -> Task<(Data, HTTPURLResponse), any Error> {
        Task { try await manager.data(for: URLRequest(url: url), timeout: timeout) }
    }

    /// Waits until `limiter` has `inFlight` attempts in flight to `host` and `waiting` queued.
    func slots(
        _ limiter: HostConcurrencyLimiter, _ host: String, inFlight: Int, waiting: Int,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        await eventually("\(inFlight) in flight and \(waiting) waiting", pollingEvery: .milliseconds(2), sourceLocation: sourceLocation) {
            limiter.inFlight(to: host) == inFlight && limiter.waiting(for: host) == waiting
        }
    }

    @Test("at most N in flight; the rest wait first in, first out; a full queue refuses at once", arguments: HTTPTestTransport.allCases)
    func fifoAndBound(_ transport: HTTPTestTransport) async throws {
        _ = processTestMetrics
        let label = "host-concurrency-\(transport.rawValue)"
        try await withHTTPTestServer(knobs: httpTestKnobs { $0.profileDelay = 0 }) { server in
            await server.holdProfiles()
            let recorder = HTTPTestRecordingTransport(transport.make())
            let manager = URLTaskManager(
                transport: recorder, hostConcurrency: HostConcurrencyLimit(maximumInFlight: 1, maximumQueued: 2),
                timeout: TestDeadline.scaled(.seconds(60)), metricsLabel: label
            )
            let limiter = try #require(manager.hostLimiter)
            let host = try #require(HostConcurrencyLimit.host(of: server.baseURL))
            var callers: [Task<(Data, HTTPURLResponse), any Error>] = []
            for user in 0..<3 {
                callers.append(caller(manager, server.url("/profile?user=u\(user)")))
                await slots(limiter, host, inFlight: 1, waiting: user)
            }
            await #expect(throws: URLTaskError.hostQueueFull(host: host, maximumQueued: 2)) {
                _ = try await manager.data(for: URLRequest(url: server.url("/profile?user=refused")))
            }
            #expect(recorder.requests.count == 1, "only the first request reached the transport")
            await server.releaseProfiles()
            for caller in callers {
                #expect(try await caller.boundedValue().1.statusCode == 200)
            }
            #expect(recorder.requests.map { $0.url?.query } == ["user=u0", "user=u1", "user=u2"], "first in, first out")
            #expect(limiter.hostCount == 0, "a host with nothing in flight is forgotten")
            let dimensions = [("name", label)]
            #expect(processTestMetrics.counterTotal(label: "taskkit_http_host_queue_rejections", dimensions: dimensions) == 1)
            #expect(try processTestMetrics.expectTimer("taskkit_http_host_queue_wait", dimensions).values.count == 2)
            #expect(try processTestMetrics.expectMeter("taskkit_http_host_queued", dimensions).lastValue == 0)
        }
    }

    @Test("a queued request whose deadline passes fails with TaskError.timedOut; a cancelled one leaves at once; a cancel before start wins", arguments: HTTPTestTransport.allCases)
    func timeoutAndCancellationWhileQueued(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer(knobs: httpTestKnobs { $0.profileDelay = 0 }) { server in
            await server.holdProfiles()
            let clock = ManualClock()
            let recorder = HTTPTestRecordingTransport(transport.make())
            let manager = URLTaskManager(
                transport: recorder, hostConcurrency: HostConcurrencyLimit(maximumInFlight: 1), clock: clock
            )
            let limiter = try #require(manager.hostLimiter)
            let host = try #require(HostConcurrencyLimit.host(of: server.baseURL))
            let first = caller(manager, server.url("/profile?user=first"))
            await slots(limiter, host, inFlight: 1, waiting: 0)
            let timed = caller(manager, server.url("/profile?user=timed"), timeout: .seconds(1))
            await slots(limiter, host, inFlight: 1, waiting: 1)
            let patient = caller(manager, server.url("/profile?user=patient"))
            await slots(limiter, host, inFlight: 1, waiting: 2)
            let cancelled = caller(manager, server.url("/profile?user=cancelled"))
            await slots(limiter, host, inFlight: 1, waiting: 3)

            cancelled.cancel()
            await #expect(throws: CancellationError.self) { _ = try await cancelled.boundedValue() }
            #expect(limiter.waiting(for: host) == 2, "the cancelled caller left the queue")

            await eventually("the deadline sleeps on the clock", pollingEvery: .milliseconds(2)) { clock.sleeperCount == 1 }
            clock.advance(by: .seconds(1))
            await expectTimedOut(timed)
            #expect(limiter.waiting(for: host) == 1, "the timed-out caller left the queue")

            let early = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await manager.data(for: URLRequest(url: server.url("/profile?user=early")))
            }
            await #expect(throws: CancellationError.self) { _ = try await early.boundedValue() }
            #expect(limiter.waiting(for: host) == 1)

            await server.releaseProfiles()
            #expect(try await first.boundedValue().1.statusCode == 200)
            #expect(try await patient.boundedValue().1.statusCode == 200)
            #expect(recorder.requests.map { $0.url?.query } == ["user=first", "user=patient"], "nobody who left was sent")
            #expect(limiter.hostCount == 0)
        }
    }

    @Test("coalesced callers take no slot: only the flight's attempt does", arguments: HTTPTestTransport.allCases)
    func coalescedCallersTakeNoSlot(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer(knobs: httpTestKnobs { $0.profileDelay = 0 }) { server in
            await server.holdProfiles()
            let manager = URLTaskManager(
                transport: transport.make(), hostConcurrency: HostConcurrencyLimit(maximumInFlight: 1, maximumQueued: 0),
                timeout: TestDeadline.scaled(.seconds(60)), coalescing: .standard
            )
            let limiter = try #require(manager.hostLimiter)
            let host = try #require(HostConcurrencyLimit.host(of: server.baseURL))
            let url = server.url("/profile?user=shared")
            let callers = (0..<10).map { _ in caller(manager, url) }
            await eventually("10 callers share the flight", pollingEvery: .milliseconds(2)) {
                manager.coalescer?.waitingCallers == 10
            }
            await slots(limiter, host, inFlight: 1, waiting: 0)
            await server.releaseProfiles()
            for caller in callers {
                #expect(try await caller.boundedValue().1.statusCode == 200, "no caller was refused by the empty queue")
            }
            #expect(await server.hits(.profile) == 1)
        }
    }

    @Test("1,000 callers with random cancellations and timeouts: never more than N in flight to the host; each answered or failed with its own error", arguments: HTTPTestTransport.allCases)
    func thousandCallers(_ transport: HTTPTestTransport) async throws {
        enum Kind { case plain, timeout, cancel }
        try await withHTTPTestServer { server in
            let counting = HTTPTestConcurrencyTransport(transport.make())
            let clock = ManualClock()
            let limit = HostConcurrencyLimit(maximumInFlight: 4, maximumQueued: 1_000)
            let manager = URLTaskManager(transport: counting, hostConcurrency: limit, clock: clock)
            let limiter = try #require(manager.hostLimiter)
            let host = try #require(HostConcurrencyLimit.host(of: server.baseURL))
            let url = server.url("/concurrent?ms=2")

            // Without cancellations, the server itself never works on more than 4 at once.
            let plain = (0..<100).map { _ in caller(manager, url) }
            for caller in plain {
                #expect(try await caller.boundedValue().1.statusCode == 200)
            }
            let seen = await server.concurrency(host: host)
            #expect(seen.total == 100 && seen.peak <= limit.maximumInFlight, "the server saw \(seen)")

            // A caller that left is answered at once and gives its slot back when the transport
            // returns, before the server may have noticed: from here the transport's count is
            // the one the limit bounds.
            var random = SeededRandomNumberGenerator(seed: 50)
            let kinds: [Kind] = (0..<1_000).map { _ in
                switch Int.random(in: 0..<10, using: &random) {
                case 0, 1: .timeout
                case 2, 3: .cancel
                default: .plain
                }
            }
            let callers = kinds.map { caller(manager, url, timeout: $0 == .timeout ? .seconds(1) : nil) }
            await eventually("requests are under way", pollingEvery: .milliseconds(1)) { counting.sent >= 200 }
            clock.advance(by: .seconds(1))
            for (index, kind) in kinds.enumerated() where kind == .cancel {
                callers[index].cancel()
                if index % 16 == 0 { await Task.yield() }
            }
            var outcomes = (ok: 0, timedOut: 0, cancelled: 0)
            for (caller, kind) in zip(callers, kinds) {
                do {
                    #expect(try await caller.boundedValue().1.statusCode == 200)
                    outcomes.ok += 1
                } catch is CancellationError where kind == .cancel {
                    outcomes.cancelled += 1
                } catch TaskError.timedOut where kind == .timeout {
                    outcomes.timedOut += 1
                } catch {
                    Issue.record("a caller of kind \(kind) failed with \(error)")
                }
            }
            #expect(counting.peak(host) == limit.maximumInFlight, "the transport saw \(counting.peak(host)) at once")
            #expect(outcomes.timedOut > 0 && outcomes.cancelled > 0 && outcomes.ok > 0, "\(outcomes)")
            #expect(limiter.hostCount == 0, "nothing in flight or waiting is left")
            await eventually("the server finished the requests whose callers left") {
                await server.concurrency(host: host).inFlight == 0
            }
        }
    }
}
#endif
