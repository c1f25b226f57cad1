#if Examples
import Foundation
import MetricsTestKit
import TaskKit
import TaskKitLoopbackServer
import TaskKitTestSupport
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP

/// `URLTaskManager(metricsLabel:)` against the loopback server, read through MetricsTestKit.
@Suite(.scaledTimeLimit(minutes: 2)) struct URLTaskManagerMetricsTests {
    private func requests(_ label: String, _ method: String, _ status: String) -> Int64 {
        processTestMetrics.counterTotal(
            label: "taskkit_http_requests", dimensions: [("name", label), ("method", method), ("status", status)]
        )
    }

    private func total(_ metric: String, _ label: String) -> Int64 {
        processTestMetrics.counterTotal(label: metric, dimensions: [("name", label)])
    }

    @Test("a request counts once with its final status; its retries count apart", arguments: HTTPTestTransport.allCases)
    func requestsAndRetries(transport: HTTPTestTransport) async throws {
        _ = processTestMetrics  // bootstrapped before the manager makes its metric objects
        let label = "http-requests-\(transport.rawValue)"
        try await withHTTPTestServer { server in
            let policy = HTTPRetryPolicy(retry: .count(count: 3, intervalProxy: .fixed(.zero)))
            let manager = URLTaskManager(
                interceptors: [policy], transport: transport.make(), timeout: TestDeadline.scaled(.seconds(60)), metricsLabel: label
            )
            // `GET /flaky` answers 503 twice, then 200: one request, two retries.
            let (_, flaky) = try await manager.data(for: URLRequest(url: server.url("/flaky?key=metrics")))
            #expect(flaky.statusCode == 200)
            let (_, missing) = try await manager.data(for: URLRequest(url: server.url("/status?code=404")))
            #expect(missing.statusCode == 404)
            // `POST` is not retried (not idempotent): the first 503 is final.
            var post = URLRequest(url: server.url("/flaky?key=metrics-post"))
            post.httpMethod = "POST"
            let (_, unavailable) = try await manager.data(for: post)
            #expect(unavailable.statusCode == 503)
            // A connection closed before any reply, on a manager without retries: no response.
            let bare = URLTaskManager(transport: transport.make(), timeout: TestDeadline.scaled(.seconds(60)), metricsLabel: label)
            await #expect(throws: (any Error).self) {
                try await bare.data(for: URLRequest(url: server.misbehavingURL(.closedBeforeReply)))
            }

            #expect(requests(label, "GET", "2xx") == 1)
            #expect(requests(label, "GET", "4xx") == 1)
            #expect(requests(label, "POST", "5xx") == 1)
            #expect(requests(label, "GET", "error") == 1)
            #expect(total("taskkit_http_retries", label) == 2)
            let timer = try processTestMetrics.expectTimer("taskkit_http_request_duration", [("name", label)])
            #expect(timer.values.count == 4)
            // The manager's TaskManager reports under the same label.
            #expect(
                processTestMetrics.counterTotal(
                    label: "taskkit_taskmanager_tasks", dimensions: [("name", label), ("outcome", "succeeded")]
                ) == 3
            )
        }
    }

    @Test("a token refresh counts under the label of the manager whose request started it")
    func tokenRefreshes() async throws {
        _ = processTestMetrics
        try await withHTTPTestServer { server in
            let authenticator = BearerTokenAuthenticator(refresh: httpTestRefresh(server))
            let first = URLTaskManager(
                interceptors: [authenticator], transport: HTTPTestTransport.urlSession.make(),
                timeout: TestDeadline.scaled(.seconds(60)), metricsLabel: "http-refresh-first"
            )
            let second = URLTaskManager(
                interceptors: [authenticator], transport: HTTPTestTransport.urlSession.make(),
                timeout: TestDeadline.scaled(.seconds(60)), metricsLabel: "http-refresh-second"
            )
            let (_, response) = try await first.data(for: URLRequest(url: server.url("/protected")))
            #expect(response.statusCode == 200)
            _ = try await second.data(for: URLRequest(url: server.url("/protected")))  // token still valid
            #expect(await server.refreshCount() == 1)
            #expect(total("taskkit_http_token_refreshes", "http-refresh-first") == 1)
            #expect(total("taskkit_http_token_refreshes", "http-refresh-second") == 0)
        }
    }
}
#endif
