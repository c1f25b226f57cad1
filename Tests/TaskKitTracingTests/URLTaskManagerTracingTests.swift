#if Tracing && Examples && AsyncHTTPClient
import AsyncHTTPClient
import Foundation
import InMemoryTracing
import TaskKit
import TaskKitAsyncHTTPClient
@testable import TaskKitHTTP
import TaskKitLoopbackServer
import TaskKitTestSupport
import TaskKitTracing
import Testing
import Tracing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// URLTaskManager's client spans, recorded by an `InMemoryTracer` with W3C propagation, against
/// the loopback server, which echoes the headers it received (`GET /headers`).
@Suite(.scaledTimeLimit(minutes: 2)) struct URLTaskManagerTracingTests {
    /// The transports the tests run over.
    enum Transport: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case urlSession = "URLSession"
        case asyncHTTPClient = "AsyncHTTPClient"

        var testDescription: String { rawValue }

        func make() -> any HTTPTransport {
            switch self {
            case .urlSession: URLSessionTransport()
            // The shared client lives as long as the process; it traces through the tracer
            // bootstrapped when it was made (none in the tests).
            case .asyncHTTPClient: AsyncHTTPClientTransport(client: .shared)
            }
        }
    }

    /// Starts a loopback server, runs `body`, and always stops the server.
    private func withServer<R>(_ body: (LoopbackServer) async throws -> R) async throws -> R {
        let server = try await LoopbackServer.start()
        do {
            let result = try await body(server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    private func traceparents(in body: Data) -> [String] {
        String(decoding: body, as: UTF8.self).split(separator: "\n")
            .filter { $0.hasPrefix("traceparent: ") }
            .map { String($0.dropFirst("traceparent: ".count)) }
    }

    @Test(
        "each attempt is a client span named by the method, whose traceparent the server receives",
        arguments: Transport.allCases
    )
    func attemptsAreClientSpans(transport: Transport) async throws {
        try await withServer { server in
            let tracer = W3CInMemoryTracer()
            let manager = URLTaskManager(
                transport: transport.make(), timeout: TestDeadline.scaled(.seconds(60)), tracing: .distributedTracing(tracer: tracer)
            )
            let url = server.url("/headers")
            let (parentID, body) = try await tracer.withSpan("handler") { parent async throws in
                let (body, response) = try await manager.data(for: URLRequest(url: url))
                #expect(response.statusCode == 200)
                return (spanID(of: parent), body)
            }
            // handler → URLTask (the manager's task span) → GET (the attempt).
            let spans = tracer.finishedSpans
            let task = try #require(spans.first { $0.operationName == "URLTask" })
            #expect(task.parentSpanID == parentID)
            let attempts = spans.filter { $0.kind == .client && $0.parentSpanID == task.spanID }
            #expect(attempts.count == 1)
            let attempt = try #require(attempts.first)
            #expect(attempt.operationName == "GET")
            #expect(attempt.attributes.get("http.request.method") == .string("GET"))
            #expect(attempt.attributes.get("url.full") == .string(url.absoluteString))
            #expect(attempt.attributes.get("http.response.status_code") == .int64(200))
            #expect(attempt.attributes.get("http.request.resend_count") == nil)
            #expect(attempt.status?.code != .error)
            // The server received one W3C traceparent: the attempt's, in the handler's trace.
            #expect(traceparents(in: body) == ["00-\(attempt.traceID)-\(attempt.spanID)-01"])
        }
    }

    @Test("a coalesced flight is a span under the caller that started it; a caller that joined it links to it")
    func coalescedFlightSpans() async throws {
        try await withServer { server in
            let tracer = W3CInMemoryTracer()
            let manager = URLTaskManager(
                transport: Transport.urlSession.make(), timeout: TestDeadline.scaled(.seconds(60)),
                coalescing: .standard, tracing: .distributedTracing(tracer: tracer)
            )
            let url = server.url("/slow?ms=1000")
            let first = Task {
                try await tracer.withSpan("first") { _ async throws in try await manager.data(for: URLRequest(url: url)) }
            }
            // The flight's span is recorded for joiners before its task starts, and the request's
            // span starts in that task: once the request is under way, a caller joins the flight.
            await eventually("the flight's request started", pollingEvery: .milliseconds(2)) {
                tracer.recorder.activeSpans.contains { $0.operationName == "URLTask" }
            }
            let second = try await tracer.withSpan("second") { _ async throws in try await manager.data(for: URLRequest(url: url)) }
            let firstResult = try await first.boundedValue()
            #expect(firstResult.0 == second.0)
            let spans = tracer.finishedSpans
            let flight = try #require(spans.first { $0.operationName == "HTTP flight" })
            let starter = try #require(spans.first { $0.operationName == "first" })
            #expect(flight.parentSpanID == starter.spanID)
            #expect(flight.attributes.get("taskkit.http.callers") == .int64(2))
            // The request itself ran once, inside the flight.
            #expect(spans.filter { $0.operationName == "URLTask" }.map(\.parentSpanID) == [flight.spanID])
            let joined = try #require(spans.first { $0.operationName == "HTTP coalesced" })
            let joiner = try #require(spans.first { $0.operationName == "second" })
            #expect(joined.parentSpanID == joiner.spanID)
            #expect(joined.links.compactMap { $0.context.inMemorySpanContext?.spanID } == [flight.spanID])
        }
    }

    /// The example of the "Running on a server" article, with `withTracer` in place of the
    /// bootstrap: components made with `.distributedTracing` while the tracer is active.
    @Test("the article's example: .distributedTracing spans under the handler, traceparent through the active instrument")
    func articleExample() async throws {
        try await withServer { server in
            let tracer = W3CInMemoryTracer()
            let (profiles, backend) = withTracer(tracer) {
                (
                    MonoTask<String>(resultExpireDuration: .seconds(60), tracing: .distributedTracing) { .success("profile") },
                    URLTaskManager(interceptors: [HTTPRetryPolicy()], transport: URLSessionTransport(), tracing: .distributedTracing)
                )
            }
            let ordersURL = server.url("/headers")
            let (handlerID, body) = try await tracer.withSpan("handler") { handler async throws in
                let profile = try await profiles.executeThrows()
                #expect(profile == "profile")
                let (data, _) = try await backend.data(for: URLRequest(url: ordersURL))
                return (spanID(of: handler), data)
            }
            let spans = tracer.finishedSpans
            let execution = try #require(spans.first { $0.operationName == "MonoTask.execute" })
            #expect(execution.parentSpanID == handlerID)
            let task = try #require(spans.first { $0.operationName == "URLTask" })
            #expect(task.parentSpanID == handlerID)
            let attempt = try #require(spans.first { $0.kind == .client })
            #expect(attempt.parentSpanID == task.spanID)
            #expect(traceparents(in: body) == ["00-\(attempt.traceID)-\(attempt.spanID)-01"])
        }
    }

    @Test("an attempt that waited for a slot of its host has the event and the wait", arguments: Transport.allCases)
    func hostSlotWait(transport: Transport) async throws {
        try await withServer { server in
            await server.updateKnobs { $0.profileDelay = 0 }
            await server.holdProfiles()
            let tracer = W3CInMemoryTracer()
            let manager = URLTaskManager(
                transport: transport.make(), hostConcurrency: HostConcurrencyLimit(maximumInFlight: 1),
                timeout: TestDeadline.scaled(.seconds(60)), tracing: .distributedTracing(tracer: tracer)
            )
            let limiter = try #require(manager.hostLimiter)
            let host = try #require(HostConcurrencyLimit.host(of: server.baseURL))
            let first = Task { try await manager.data(for: URLRequest(url: server.url("/profile?user=first"))) }
            await eventually("the first request has the slot", pollingEvery: .milliseconds(2)) { limiter.inFlight(to: host) == 1 }
            let secondURL = server.url("/profile?user=second")
            let second = Task { try await manager.data(for: URLRequest(url: secondURL)) }
            await eventually("the second request waits", pollingEvery: .milliseconds(2)) { limiter.waiting(for: host) == 1 }
            await server.releaseProfiles()
            _ = try await first.boundedValue()
            _ = try await second.boundedValue()
            let attempts = tracer.finishedSpans.filter { $0.kind == .client }
            #expect(attempts.count == 2)
            let waited = attempts.filter { span in span.events.contains { $0.name == "taskkit.http.host_slot_waited" } }
            #expect(waited.count == 1)
            #expect(waited.first?.attributes.get("url.full") == .string(secondURL.absoluteString))
            #expect(waited.first?.attributes.get("taskkit.http.host_queue_wait_ms") != nil)
        }
    }

    @Test(
        "a hedge is a span of its own; the winner has hedge_won; the loser is cancelled and its span ends at once",
        arguments: Transport.allCases
    )
    func hedgeSpans(transport: Transport) async throws {
        try await withServer { server in
            let tracer = W3CInMemoryTracer()
            let manager = URLTaskManager(
                transport: transport.make(), hedging: HedgingPolicy(delay: .milliseconds(50)),
                timeout: TestDeadline.scaled(.seconds(60)), tracing: .distributedTracing(tracer: tracer)
            )
            // The first call of the key answers after an hour, the hedge at once: the slow
            // copy's span ends within the deadline only if the copy was cancelled.
            let (body, _) = try await manager.data(for: URLRequest(url: server.url("/slow-first?key=traced-\(transport.rawValue)&ms=3600000")))
            #expect(String(decoding: body, as: UTF8.self) == "2")
            await eventually("both copies' spans ended", within: TestDeadline.scaled(.seconds(90)), pollingEvery: .milliseconds(5)) {
                tracer.finishedSpans.filter { $0.kind == .client }.count == 2
            }
            let copies = tracer.finishedSpans.filter { $0.kind == .client }
            let hedge = try #require(copies.first { $0.attributes.get("taskkit.http.hedge") == .int64(1) })
            let first = try #require(copies.first { $0.attributes.get("taskkit.http.hedge") == nil })
            #expect(hedge.events.map(\.name) == ["taskkit.http.hedge_won"])
            #expect(hedge.attributes.get("http.response.status_code") == .int64(200))
            #expect(first.attributes.get("http.response.status_code") == nil)
            #expect(first.status?.code == .error)
            #expect(first.errors.count == 1)
            #expect(first.events.contains { $0.name == "taskkit.http.hedge_won" } == false)
        }
    }

    @Test("retries are spans of their own with resend counts; 5xx and no response set error status")
    func retriesAndErrors() async throws {
        try await withServer { server in
            let tracer = W3CInMemoryTracer()
            let policy = HTTPRetryPolicy(retry: .count(count: 3, intervalProxy: .fixed(.zero)))
            let manager = URLTaskManager(
                interceptors: [policy], transport: Transport.urlSession.make(), timeout: TestDeadline.scaled(.seconds(60)),
                tracing: .distributedTracing(tracer: tracer)
            )
            // `GET /flaky` answers 503 twice, then 200.
            _ = try await manager.data(for: URLRequest(url: server.url("/flaky?key=tracing")))
            let attempts = tracer.finishedSpans.filter { $0.kind == .client && $0.operationName == "GET" }
            #expect(attempts.count == 3)
            #expect(attempts.map { $0.attributes.get("http.request.resend_count") } == [nil, .int64(1), .int64(2)])
            #expect(attempts.map { $0.status?.code == .error } == [true, true, false])
            #expect(attempts.first?.attributes.get("error.type") == .string("503"))
            #expect(attempts.map { $0.attributes.get("http.response.status_code") } == [.int64(503), .int64(503), .int64(200)])

            tracer.recorder.clearFinishedSpans()
            let bare = URLTaskManager(
                transport: Transport.urlSession.make(), timeout: TestDeadline.scaled(.seconds(60)), tracing: .distributedTracing(tracer: tracer)
            )
            await #expect(throws: (any Error).self) {
                try await bare.data(for: URLRequest(url: server.misbehavingURL(.closedBeforeReply)))
            }
            let failed = try #require(tracer.finishedSpans.first { $0.kind == .client })
            #expect(failed.status?.code == .error)
            #expect(failed.attributes.get("http.response.status_code") == nil)
            #expect(failed.errors.count == 1)
            let task = try #require(tracer.finishedSpans.first { $0.operationName == "URLTask" })
            #expect(task.status?.code == .error)
        }
    }
}
#endif
