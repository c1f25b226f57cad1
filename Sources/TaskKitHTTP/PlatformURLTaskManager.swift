// The initialiser that picks URLSession without being asked, in one place: on Linux it is
// deprecated, because FoundationNetworking stops the process when a server closes a connection
// in the middle of the response headers (.ci/check-platform-conditionals allows platform
// conditionals only in such files).
import Foundation
import Logging
import TaskKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLTaskManager {
    /// Creates a manager over a new `URLSession` made from `configuration`.
    ///
    /// Deprecated on Linux: FoundationNetworking's `URLSession` stops the process (`fatalError`)
    /// when a server closes the connection in the middle of the response headers. Pass a
    /// `transport:` there instead: `AsyncHTTPClientTransport` (`TaskKitAsyncHTTPClient`) for
    /// servers you do not control, or `URLSessionTransport(configuration:)` where you accept that
    /// risk.
    ///
    /// - Parameters: as for
    ///   ``init(interceptors:reactors:transport:maximumConcurrentTasks:hostConcurrency:rateLimit:circuitBreaker:retryBudget:hedging:timeout:coalescing:shutdownGracePeriod:clock:logger:metricsLabel:tracing:)``,
    ///   with `configuration` the session's configuration (default:
    ///   ``URLSessionTransport/defaultConfiguration``; the URL cache is always dropped on Linux,
    ///   see ``URLSessionTransport/init(configuration:)``).
    #if canImport(FoundationNetworking)
    @available(
        *, deprecated,
        message: "On Linux, URLSession stops the process when a server closes mid-headers: pass transport: AsyncHTTPClientTransport(...) (TaskKitAsyncHTTPClient), or URLSessionTransport(configuration:) to accept that"
    )
    #endif
    public convenience init(
        interceptors: [any URLTaskInterceptor] = [],
        reactors: [any URLTaskReactor] = [],
        configuration: URLSessionConfiguration = URLSessionTransport.defaultConfiguration,
        maximumConcurrentTasks: Int? = nil,
        timeout: Duration? = nil,
        coalescing: URLTaskCoalescing? = nil,
        shutdownGracePeriod: Duration = .seconds(10),
        clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger = .silent(label: "TaskKitHTTP"),
        metricsLabel: String? = nil,
        tracing: TaskTracing = .none
    ) {
        self.init(
            interceptors: interceptors, reactors: reactors, transport: URLSessionTransport(configuration: configuration),
            maximumConcurrentTasks: maximumConcurrentTasks, timeout: timeout, coalescing: coalescing,
            shutdownGracePeriod: shutdownGracePeriod, clock: clock, logger: logger,
            metricsLabel: metricsLabel, tracing: tracing
        )
    }
}
