#if ServiceLifecycle
import ServiceLifecycle
import TaskKit
import TaskKitHTTP

/// A ``TaskKit/TaskManager`` runs as a swift-service-lifecycle `Service`: add it to the
/// application's `ServiceGroup` beside the server, and it shuts down with the application.
///
/// ```swift
/// let manager = TaskManager(maximumConcurrentTasks: 8, shutdownGracePeriod: .seconds(20))
/// let group = ServiceGroup(
///     services: [server, manager], gracefulShutdownSignals: [.sigterm], logger: logger
/// )
/// try await group.run()
/// ```
extension TaskManager: Service {
    /// Runs until the service group shuts down gracefully, then shuts the manager down.
    ///
    /// Until then the manager works as usual. On graceful shutdown this calls
    /// `TaskManager.shutDown()`: new tasks are refused with
    /// `TaskError.shuttingDown`, started and queued tasks get
    /// `TaskManager.shutdownGracePeriod` to finish, and what remains is cancelled. If
    /// this task is cancelled (the group's cancellation, or its `gracefulShutdownTimeout`),
    /// before or during the grace period, what remains is cancelled at once. Returns (never
    /// throws) once every caller has been answered.
    public func run() async throws {
        // Returns on graceful shutdown; throws `CancellationError` when this task is cancelled,
        // and `shutDown()` then cancels at once.
        try? await gracefulShutdown()
        await shutDown()
    }
}

/// A ``TaskKitHTTP/URLTaskManager`` runs as a swift-service-lifecycle `Service`, through the
/// `TaskManager` it runs requests on: see `TaskManager`'s `run()`.
extension URLTaskManager: Service {
    /// Runs until the service group shuts down gracefully, then shuts the manager down: in-flight
    /// requests get the grace period, new requests fail with `TaskError.shuttingDown`.
    public func run() async throws {
        try await taskManager.run()
    }
}

#endif
