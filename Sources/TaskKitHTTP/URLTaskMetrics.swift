import CoreMetrics
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The swift-metrics objects of one ``URLTaskManager`` created with a `metricsLabel`, all made
/// in its initialiser. Handlers are user code: they are called outside every lock.
final class URLTaskMetrics: Sendable {
    /// The methods with counters of their own; any other method counts as `_OTHER` (as
    /// OpenTelemetry's HTTP conventions name it).
    static let methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"]
    /// The `status` dimension's values; `error` when no response came back.
    static let statuses = ["1xx", "2xx", "3xx", "4xx", "5xx", "error"]

    /// `taskkit_http_requests`, by method (``methods`` then `_OTHER`) and status (``statuses``).
    private let requests: [[Counter]]
    /// `taskkit_http_retries`: attempts sent again on an interceptor's `retry`/`retryAfter`.
    let retries: Counter
    /// `taskkit_http_token_refreshes`: bearer-token refreshes this manager's requests started.
    let tokenRefreshes: Counter
    /// `taskkit_http_request_duration`: one request, every attempt and wait included.
    let requestDuration: CoreMetrics.Timer

    init(label: String) {
        let name = ("name", label)
        requests = (Self.methods + ["_OTHER"]).map { method in
            Self.statuses.map { status in
                Counter(label: "taskkit_http_requests", dimensions: [name, ("method", method), ("status", status)])
            }
        }
        retries = Counter(label: "taskkit_http_retries", dimensions: [name])
        tokenRefreshes = Counter(label: "taskkit_http_token_refreshes", dimensions: [name])
        requestDuration = CoreMetrics.Timer(label: "taskkit_http_request_duration", dimensions: [name])
    }

    /// Counts a finished request by its method and final outcome.
    func recordRequest(method: String?, outcome: Result<URLTaskResponse, any Error>?) {
        let methodIndex = Self.methods.firstIndex(of: method ?? "GET") ?? Self.methods.count
        let statusIndex: Int
        switch outcome {
        case .success(let response)?:
            statusIndex = min(max(response.statusCode / 100, 1), 5) - 1
        case .failure?, nil:
            statusIndex = Self.statuses.count - 1
        }
        requests[methodIndex][statusIndex].increment()
    }
}
