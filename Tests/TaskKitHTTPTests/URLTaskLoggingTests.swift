#if Examples
import Foundation
import Logging
import TaskKit
import TaskKitLoopbackServer
import TaskKitTestSupport
import TaskKitTesting
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP

@Suite("URLTaskManager request logging")
struct URLTaskLoggingTests {
    @Test("each request's life is logged at .debug with an event key: adapted, sent, replayed, retried, completed")
    func lifeIsLogged() async throws {
        try await withHTTPTestServer(knobs: httpTestKnobs { $0.failuresBeforeSuccess = 1 }) { server in
            let (logger, store) = CapturingLogHandler.logger(level: .debug)
            let clock = ManualClock()
            let token = await server.issueToken()
            let authenticator = BearerTokenAuthenticator(
                credential: BearerCredential(accessToken: token), clock: clock, refresh: httpTestRefresh(server)
            )
            let manager = URLTaskManager(
                interceptors: [authenticator, httpTestRetryPolicy(count: 2)], transport: URLSessionTransport(), clock: clock,
                logger: logger
            )
            await server.expireAllTokens()
            let request = Task { try await manager.response(for: URLRequest(url: server.url("/flaky-protected?key=log"))) }
            #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(1))
            let status = try await request.boundedValue().statusCode
            #expect(status == 200)

            let records = store.all.filter { $0.metadata["event"] != nil }
            #expect(
                records.map { "\($0.metadata["event"]!)" } == [
                    "adapted", "sent", "replayed",  // 401 with the old token
                    "adapted", "sent", "retried",  // 503
                    "adapted", "sent", "completed",  // 200
                ]
            )
            #expect(records.allSatisfy { $0.level == .debug })
            #expect(Set(records.map { "\($0.metadata["request"]!)" }).count == 1)
            #expect(records.map { "\($0.metadata["attempt"] ?? "-")" } == ["1", "1", "1", "2", "2", "2", "3", "3", "3"])
            #expect(records.compactMap { $0.metadata["status"].map { "\($0)" } } == ["401", "401", "503", "503", "200", "200"])
            #expect("\(records[2].metadata["by"]!)" == "BearerTokenAuthenticator")
            #expect("\(records[5].metadata["by"]!)" == "HTTPRetryPolicy")
            #expect("\(records[5].metadata["delay"]!)" == "\(Duration.seconds(1))")
            #expect("\(records[0].metadata["url"]!)" == server.url("/flaky-protected?key=log").absoluteString)
            #expect("\(records[0].metadata["method"]!)" == "GET")
        }
    }

    @Test("a failed attempt is logged with its error")
    func errorIsLogged() async throws {
        let stopped = try RefusingPort()
        let url = stopped.url("/hello")
        let (logger, store) = CapturingLogHandler.logger(level: .trace)
        let manager = URLTaskManager(transport: URLSessionTransport(), logger: logger)
        await #expect(throws: URLError.self) { _ = try await manager.data(for: URLRequest(url: url)) }
        let sent = try #require(store.all.first { $0.metadata["event"] == "sent" })
        #expect(sent.metadata["error"] != nil)
        #expect(store.events.contains("completed"))
        withExtendedLifetime(stopped) {}  // the port stays reserved until here
    }

    @Test("a URLTaskReactor's match is logged as reacted, and the requeued run as requeued")
    func reactionIsLogged() async throws {
        final class URLTaskLoggingTestsRequeueOnce: URLTaskReactor {
            let fired = LockedState(false)
            var configuration: ReactorConfiguration { ReactorConfiguration(requeuesTask: true) }
            func shouldExecute(after result: Result<URLTaskResponse, any Error>, from task: URLTask, with handle: TaskHandle) -> Bool {
                fired.withLock { fired in
                    defer { fired = true }
                    return !fired
                }
            }
            func execute() async throws {}
        }
        try await withHTTPTestServer { server in
            let (logger, store) = CapturingLogHandler.logger(level: .debug)
            let manager = URLTaskManager(
                reactors: [URLTaskLoggingTestsRequeueOnce()], transport: URLSessionTransport(), logger: logger
            )
            let status = try await manager.data(for: URLRequest(url: server.url("/hello"))).1.statusCode
            #expect(status == 200)
            #expect(await server.hits(.hello) == 2)
            let events = store.events
            #expect(events == ["adapted", "sent", "completed", "reacted", "requeued", "adapted", "sent", "completed"])
            let reacted = try #require(store.all.first { $0.metadata["event"] == "reacted" })
            #expect("\(reacted.metadata["reactor"]!)".hasSuffix("URLTaskLoggingTestsRequeueOnce"))
        }
    }

    @Test("above .debug nothing is logged and no metadata is built")
    func silentAboveDebug() async throws {
        try await withHTTPTestServer { server in
            let (logger, store) = CapturingLogHandler.logger(level: .info)
            let manager = URLTaskManager(
                interceptors: [httpTestRetryPolicy()], transport: URLSessionTransport(), logger: logger
            )
            let writesBefore = store.metadataWriteCount
            for _ in 0..<5 { _ = try await manager.data(for: URLRequest(url: server.url("/hello"))) }
            #expect(store.all.isEmpty)
            #expect(store.metadataWriteCount == writesBefore)
        }
    }

    @Test("the default logger is silent")
    func defaultLoggerIsSilent() {
        let silent = Logger.silent(label: "TaskKitHTTP")
        #expect(silent.logLevel > .debug || silent.handler is SwiftLogNoOpLogHandler)
    }
}
#endif
