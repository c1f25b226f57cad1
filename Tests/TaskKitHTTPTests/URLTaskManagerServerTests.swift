#if Examples
import Foundation
import TaskKit
import TaskKitLoopbackServer
import TaskKitTestSupport
import TaskKitTesting
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP

/// URLTaskManager against the real loopback server: transport edges, cancellation, deadlines,
/// bad input, interceptor commands, adapters and the callback form.
@Suite("URLTaskManager against a loopback server", .serialized)  // one test at a time: each starts its own server and up to 50 requests
struct URLTaskManagerServerTests {
    @Test("a plain GET returns the body and the response", arguments: HTTPTestTransport.allCases)
    func plainGet(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(transport: transport.make())
            let (data, response) = try await manager.data(for: URLRequest(url: server.url("/hello")))
            #expect(response.statusCode == 200)
            #expect(String(decoding: data, as: UTF8.self) == "hello")
            // Statuses are results, not errors.
            let (_, notFound) = try await manager.data(for: URLRequest(url: server.url("/status?code=404")))
            #expect(notFound.statusCode == 404)
        }
    }

    @Test("a stopped server surfaces URLError.cannotConnectToHost, without hanging", arguments: HTTPTestTransport.allCases)
    func stoppedServer(_ transport: HTTPTestTransport) async throws {
        let stopped = try RefusingPort()  // nothing listens there, and no parallel test can take it
        let url = stopped.url("/hello")
        let manager = URLTaskManager(transport: transport.make(), timeout: TestDeadline.standard)
        let error = await #expect(throws: URLError.self) {
            _ = try await manager.data(for: URLRequest(url: url))
        }
        #expect(error?.code == .cannotConnectToHost)
        withExtendedLifetime(stopped) {}  // the port stays reserved until here
    }

    @Test("a stopped server: the retry policy retries the connection failure, then gives up with the URLError", arguments: HTTPTestTransport.allCases)
    func stoppedServerWithRetries(_ transport: HTTPTestTransport) async throws {
        let stopped = try RefusingPort()
        let url = stopped.url("/hello")
        let clock = ManualClock()
        let transport = HTTPTestRecordingTransport(transport.make())
        let manager = URLTaskManager(interceptors: [httpTestRetryPolicy(count: 2)], transport: transport, clock: clock)
        let request = Task { try await manager.data(for: URLRequest(url: url)) }
        #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(1))
        #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(2))
        let error = await #expect(throws: URLError.self) { _ = try await request.boundedValue() }
        #expect(error?.code == .cannotConnectToHost)
        #expect(transport.requests.count == 3)
        withExtendedLifetime(stopped) {}  // the port stays reserved until here
    }

    @Test("cancelling the awaiting task cancels the in-flight request", arguments: HTTPTestTransport.allCases)
    func cancellingTheCallerCancelsTheRequest(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let transport = HTTPTestRecordingTransport(transport.make())
            let manager = URLTaskManager(transport: transport)
            let request = Task { try await manager.data(for: URLRequest(url: server.url("/slow?ms=20000"))) }
            await eventually(pollingEvery: .milliseconds(5)) { await server.hits(.slow) == 1 }
            let started = ContinuousClock.now
            request.cancel()
            await #expect(throws: CancellationError.self) { _ = try await request.boundedValue() }
            #expect(started.duration(to: .now) < .seconds(10))
            // The URLSession task itself was cancelled (not left running for 20 s).
            await eventually(pollingEvery: .milliseconds(5)) { transport.outcomes.first.flatMap { $0 } != nil }
            guard case .failure(let underlying)?? = transport.outcomes.first else {
                Issue.record("the transport did not fail: \(transport.outcomes)")
                return
            }
            #expect((underlying as? URLError)?.code == .cancelled || underlying is CancellationError)
        }
    }

    @Test("cancelling through the handle of the callback form cancels the request", arguments: HTTPTestTransport.allCases)
    func cancellingTheHandle(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let transport = HTTPTestRecordingTransport(transport.make())
            let manager = URLTaskManager(transport: transport)
            let result = LockedState<Result<URLTaskResponse, any Error>?>(nil)
            let handle = manager.dataTask(with: URLRequest(url: server.url("/slow?ms=20000"))) { outcome in
                result.withLock { $0 = outcome }
            }
            await eventually(pollingEvery: .milliseconds(5)) { await server.hits(.slow) == 1 }
            handle.cancel()
            await eventually(pollingEvery: .milliseconds(5)) { result.withLock { $0 != nil } }
            let outcome = result.withLock { $0 }
            guard case .failure(let error)? = outcome, case .cancelled? = error as? TaskError else {
                Issue.record("expected TaskError.cancelled, got \(String(describing: outcome))")
                return
            }
            #expect(handle.state == .finished)
            await eventually(pollingEvery: .milliseconds(5)) { transport.outcomes.first.flatMap { $0 } != nil }
        }
    }

    @Test("the manager's timeout fires on its clock and cancels the request", arguments: HTTPTestTransport.allCases)
    func timeoutFires(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let transport = HTTPTestRecordingTransport(transport.make())
            let manager = URLTaskManager(transport: transport, timeout: .milliseconds(500), clock: clock)
            let request = Task { try await manager.data(for: URLRequest(url: server.url("/slow?ms=20000"))) }
            await eventually(pollingEvery: .milliseconds(5)) { await server.hits(.slow) == 1 }
            await eventually(pollingEvery: .milliseconds(5)) { clock.sleeperCount >= 1 }
            clock.advance(by: .milliseconds(499))
            #expect(transport.outcomes.first.flatMap { $0 } == nil)
            clock.advance(by: .milliseconds(1))
            let error = await #expect(throws: TaskError.self) { _ = try await request.boundedValue() }
            guard case .timedOut? = error else {
                Issue.record("expected TaskError.timedOut, got \(String(describing: error))")
                return
            }
            await eventually(pollingEvery: .milliseconds(5)) { transport.outcomes.first.flatMap { $0 } != nil }
        }
    }

    @Test("a per-request timeout overrides the manager's default", arguments: HTTPTestTransport.allCases)
    func perRequestTimeout(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let manager = URLTaskManager(transport: transport.make(), timeout: .seconds(60), clock: clock)
            let request = Task {
                try await manager.data(for: URLRequest(url: server.url("/slow?ms=20000")), timeout: .seconds(1))
            }
            await eventually(pollingEvery: .milliseconds(5)) { await server.hits(.slow) == 1 }
            #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(1))
            await #expect(throws: TaskError.self) { _ = try await request.boundedValue() }
        }
    }

    @Test("URLs that are not http or https are rejected before anything is sent", arguments: HTTPTestTransport.allCases)
    func nonHTTPURLRejected(_ transport: HTTPTestTransport) async throws {
        let transport = HTTPTestRecordingTransport(transport.make())
        let manager = URLTaskManager(transport: transport)
        for text in ["ftp://127.0.0.1/file", "file:///etc/hostname", "data:text/plain,hi", "mailto:a@127.0.0.1", "http:///no-host"] {
            let url = try #require(URL(string: text))
            let error = await #expect(throws: URLTaskError.self, "\(text)") {
                _ = try await manager.data(for: URLRequest(url: url))
            }
            #expect(error == .unsupportedURL(url))
            #expect(error?.description.contains("only http and https") == true)
        }
        #expect(transport.requests.isEmpty)
    }

    @Test("an interceptor that rewrites the URL to a non-HTTP scheme is rejected too", arguments: HTTPTestTransport.allCases)
    func adaptedToNonHTTPRejected(_ transport: HTTPTestTransport) async throws {
        struct URLTaskManagerTestsFTPRewriter: URLTaskInterceptor {
            func adapt(_ request: URLRequest, for task: URLTask, context: URLTaskContext) async throws -> URLRequest {
                URLRequest(url: URL(string: "ftp://127.0.0.1/x")!)
            }
        }
        let transport = HTTPTestRecordingTransport(transport.make())
        let manager = URLTaskManager(interceptors: [URLTaskManagerTestsFTPRewriter()], transport: transport)
        await #expect(throws: URLTaskError.unsupportedURL(URL(string: "ftp://127.0.0.1/x"))) {
            _ = try await manager.data(for: URLRequest(url: URL(string: "http://127.0.0.1:9/never")!))
        }
        #expect(transport.requests.isEmpty)
    }

    @Test("a connection closed mid-body is URLError.networkConnectionLost", arguments: HTTPTestTransport.allCases)
    func truncatedBody(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(transport: transport.make(), timeout: TestDeadline.standard)
            let error = await #expect(throws: URLError.self) {
                _ = try await manager.data(for: URLRequest(url: server.truncatedURL))
            }
            #expect(error?.code == .networkConnectionLost, "got \(String(describing: error))")
            #expect(error?.failingURL == server.truncatedURL)
            #expect(await server.hits(.truncated) == 1)
        }
    }

    @Test("garbage instead of HTTP is URLError.cannotParseResponse", arguments: HTTPTestTransport.allCases)
    func garbageResponse(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(transport: transport.make(), timeout: TestDeadline.standard)
            let error = await #expect(throws: URLError.self) {
                _ = try await manager.data(for: URLRequest(url: server.garbageURL))
            }
            #expect(error?.code == .cannotParseResponse, "got \(String(describing: error))")
            #expect(await server.hits(.garbage) >= 1)
        }
    }

    @Test("URLSessionTransport.normalized leaves other errors and non-HTTP requests alone", arguments: HTTPTestTransport.allCases)
    func normalizationIsNarrow(_ transport: HTTPTestTransport) throws {
        let http = URLRequest(url: URL(string: "http://127.0.0.1/x")!)
        let ftp = URLRequest(url: URL(string: "ftp://127.0.0.1/x")!)
        let cut = URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: "transfer closed with 5 bytes remaining to read"])
        #expect(URLSessionTransport.normalized(cut, for: http).code == .networkConnectionLost)
        // The platform's own error is kept underneath.
        #expect((URLSessionTransport.normalized(cut, for: http) as NSError).userInfo[NSUnderlyingErrorKey] as? NSError == cut as NSError)
        #expect(URLSessionTransport.normalized(cut, for: ftp).code == .unknown)
        let old = URLError(.unsupportedURL, userInfo: [NSLocalizedDescriptionKey: "Received HTTP/0.9 when not allowed"])
        #expect(URLSessionTransport.normalized(old, for: http).code == .cannotParseResponse)
        for code: URLError.Code in [.timedOut, .cannotConnectToHost, .cancelled, .unsupportedURL, .unknown] {
            #expect(URLSessionTransport.normalized(URLError(code), for: http).code == code)
        }
    }

    @Test("a truncated body is retried as a transient failure by the retry policy", arguments: HTTPTestTransport.allCases)
    func truncatedBodyRetried(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let manager = URLTaskManager(interceptors: [httpTestRetryPolicy(count: 1)], transport: transport.make(), clock: clock)
            let request = Task { try await manager.data(for: URLRequest(url: server.truncatedURL)) }
            #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(1))
            let error = await #expect(throws: URLError.self) { _ = try await request.boundedValue() }
            #expect(error?.code == .networkConnectionLost)
            #expect(await server.hits(.truncated) == 2)
        }
    }

    @Test("an interceptor holds requests in a batch and releases them together", arguments: HTTPTestTransport.allCases)
    func holdThroughURLTaskInterceptor(_ transport: HTTPTestTransport) async throws {
        struct URLTaskManagerTestsBatcher: URLTaskInterceptor {
            let size: Int
            func intercept(task: inout URLTask, currentBatchCount: Int) -> InterceptCommand {
                currentBatchCount + 1 >= size ? .execute : .hold
            }
        }
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(interceptors: [URLTaskManagerTestsBatcher(size: 3)], transport: transport.make())
            let first = manager.dataTask(with: URLRequest(url: server.url("/hello")))
            let second = manager.dataTask(with: URLRequest(url: server.url("/hello")))
            #expect(first.state == .pending && second.state == .pending)
            #expect(await server.hits(.hello) == 0)
            let (_, third) = try await manager.data(for: URLRequest(url: server.url("/hello")))
            #expect(third.statusCode == 200)
            await manager.waitTillAllTasksFinished()
            #expect(first.state == .finished && second.state == .finished)
            #expect(await server.hits(.hello) == 3)
        }
    }

    @Test("an interceptor discards a request: TaskError.discarded, nothing sent", arguments: HTTPTestTransport.allCases)
    func discardThroughURLTaskInterceptor(_ transport: HTTPTestTransport) async throws {
        struct URLTaskManagerTestsDiscarder: URLTaskInterceptor {
            func intercept(task: inout URLTask, currentBatchCount: Int) -> InterceptCommand {
                task.request.value(forHTTPHeaderField: "X-Drop") == nil ? .execute : .discard
            }
        }
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(interceptors: [URLTaskManagerTestsDiscarder()], transport: transport.make())
            var dropped = URLRequest(url: server.url("/hello"))
            dropped.setValue("1", forHTTPHeaderField: "X-Drop")
            let error = await #expect(throws: TaskError.self) { _ = try await manager.data(for: dropped) }
            guard case .discarded? = error else {
                Issue.record("expected TaskError.discarded, got \(String(describing: error))")
                return
            }
            #expect(await server.hits(.hello) == 0)
            _ = try await manager.data(for: URLRequest(url: server.url("/hello")))
            #expect(await server.hits(.hello) == 1)
        }
    }

    @Test("intercept(task:) changes to the request are sent", arguments: HTTPTestTransport.allCases)
    func interceptChangesRequest(_ transport: HTTPTestTransport) async throws {
        struct URLTaskManagerTestsRedirector: URLTaskInterceptor {
            let url: URL
            func intercept(task: inout URLTask, currentBatchCount: Int) -> InterceptCommand {
                task.request.url = url
                return .execute
            }
        }
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(interceptors: [URLTaskManagerTestsRedirector(url: server.url("/hello"))], transport: transport.make())
            let (data, _) = try await manager.data(for: URLRequest(url: server.url("/status?code=500")))
            #expect(String(decoding: data, as: UTF8.self) == "hello")
            #expect(await server.hits(.status) == 0)
        }
    }

    @Test("an async adapter's error reaches the caller unchanged and nothing is sent", arguments: HTTPTestTransport.allCases)
    func adapterFailureReachesCaller(_ transport: HTTPTestTransport) async throws {
        struct URLTaskManagerTestsRefusingAdapter: URLTaskInterceptor {
            func adapt(_ request: URLRequest, for task: URLTask, context: URLTaskContext) async throws -> URLRequest {
                await Task.yield()
                throw HTTPTestError.adapterRefused
            }
        }
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(interceptors: [URLTaskManagerTestsRefusingAdapter()], transport: transport.make())
            await #expect(throws: HTTPTestError.adapterRefused) {
                _ = try await manager.data(for: URLRequest(url: server.url("/hello")))
            }
            #expect(await server.hits(.hello) == 0)
        }
    }

    @Test("the callback form returns a TaskHandle that starts, reports and finishes", arguments: HTTPTestTransport.allCases)
    func callbackFormReturnsHandle(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(transport: transport.make())
            let result = LockedState<Result<URLTaskResponse, any Error>?>(nil)
            let handle = manager.dataTask(with: URLRequest(url: server.url("/hello")), startImmediately: false) { outcome in
                result.withLock { $0 = outcome }
            }
            #expect(handle.state == .pending)
            #expect(await server.hits(.hello) == 0)
            handle.start()
            await manager.waitTillAllTasksFinished()
            #expect(handle.state == .finished)
            let response = try #require(try result.withLock { $0 }?.get())
            #expect(response.statusCode == 200)
            #expect(String(decoding: response.data, as: UTF8.self) == "hello")
        }
    }

    @Test("the callback form completes on the requested queue", arguments: HTTPTestTransport.allCases)
    func callbackFormCompletesOnQueue(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(transport: transport.make())
            let queue = DispatchQueue(label: "URLTaskManagerTests.completion")
            let key = DispatchSpecificKey<Bool>()
            queue.setSpecific(key: key, value: true)
            let onQueue = LockedState<Bool?>(nil)
            manager.dataTask(with: URLRequest(url: server.url("/hello")), completeOn: queue) { _ in
                onQueue.withLock { $0 = DispatchQueue.getSpecific(key: key) == true }
            }
            await manager.waitTillAllTasksFinished()
            await eventually(pollingEvery: .milliseconds(5)) { onQueue.withLock { $0 } != nil }
            #expect(onQueue.withLock { $0 } == true)
        }
    }

    @Test("50 concurrent requests under a concurrency limit all complete", arguments: HTTPTestTransport.allCases)
    func concurrencyLimit(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(transport: transport.make(), maximumConcurrentTasks: 4)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<50 {
                    group.addTask { try await manager.data(for: URLRequest(url: server.url("/hello"))).1.statusCode }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 50))
            #expect(await server.hits(.hello) == 50)
        }
    }
}
#endif
