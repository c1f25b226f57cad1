/// Whether, and through what, a component reports spans: its `tracing:` parameter.
///
/// ``MonoTask``, ``KeyedMonoTask``, ``TaskManager`` and `URLTaskManager` take
/// `tracing: TaskTracing = .none`. With ``none`` (the default) a component captures no context
/// and starts no span: no cost on any path. The `TaskKitTracing` product provides the values that
/// trace, through swift-distributed-tracing:
///
/// ```swift
/// import TaskKitTracing
///
/// let manager = TaskManager(tracing: .distributedTracing)  // the bootstrapped tracer
/// ```
///
/// See <doc:RunningOnAServer> for the spans each component reports.
public struct TaskTracing: Sendable {
    /// The seam the component starts its spans through; `nil` for no tracing.
    package let tracer: (any TaskTracer)?

    /// Tracing through `tracer`; `nil` for none.
    package init(tracer: (any TaskTracer)?) {
        self.tracer = tracer
    }

    /// No tracing: no context is captured and no span is started.
    public static let none = TaskTracing(tracer: nil)
}
