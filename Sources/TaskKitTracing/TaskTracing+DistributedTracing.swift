#if Tracing
import TaskKit
import Tracing

extension TaskTracing {
    /// Tracing through the swift-distributed-tracing tracer active when the value is made: the
    /// one bound by an enclosing `withTracer(_:_:)`, else the one bootstrapped with
    /// `InstrumentationSystem.bootstrap(_:)`.
    ///
    /// Pass it where the component is created; the component keeps that tracer, and injects
    /// propagation headers through the instrument active then (the bootstrapped one: a W3C
    /// instrument writes `traceparent`). A component created before the bootstrap keeps the
    /// no-op tracer, as swift-metrics objects keep the factory of their creation; with no tracer
    /// (`NoOpTracer`) this is `TaskTracing.none` and costs nothing.
    ///
    /// ```swift
    /// InstrumentationSystem.bootstrap(tracer)  // once, at start-up, before the components
    /// let profiles = KeyedMonoTask<UserID, Profile>(maximumEntries: 10_000, tracing: .distributedTracing) { id in
    ///     try await api.profile(id)
    /// }
    /// ```
    public static var distributedTracing: TaskTracing {
        make(tracer: InstrumentationSystem.tracer, instrument: InstrumentationSystem.instrument)
    }

    /// Tracing through `tracer`, which also injects the propagation headers of the HTTP attempts.
    ///
    /// For a tracer that is not bootstrapped, or one per component. A `NoOpTracer` gives
    /// `TaskTracing.none`.
    ///
    /// - Parameter tracer: Starts the component's spans and injects their context.
    public static func distributedTracing(tracer: some Tracer) -> TaskTracing {
        make(tracer: tracer, instrument: tracer)
    }

    private static func make(tracer: some Tracer, instrument: any Instrument) -> TaskTracing {
        if tracer is NoOpTracer { return .none }
        return TaskTracing(tracer: DistributedTaskTracer(tracer: tracer, instrument: instrument))
    }
}

/// The seam on a swift-distributed-tracing `Tracer`.
struct DistributedTaskTracer<T: Tracer>: TaskTracer {
    let tracer: T
    let instrument: any Instrument

    func currentContext() -> TaskTraceContext {
        TaskTraceContext(InstrumentationContext.current ?? .topLevel)
    }

    func startSpan(_ name: String, kind: TaskSpanKind, parent: TaskTraceContext?) -> any TaskSpan {
        let context = parent?.value as? InstrumentationContext ?? .topLevel
        let span = tracer.startSpan(name, context: context, ofKind: kind == .client ? .client : .internal)
        return DistributedTaskSpan(span: span, instrument: instrument)
    }
}

/// A swift-distributed-tracing span behind the seam.
struct DistributedTaskSpan<S: Span>: TaskSpan {
    let span: S
    let instrument: any Instrument

    func setAttribute(_ name: String, _ value: Int) {
        span.attributes[name] = value
    }

    func setAttribute(_ name: String, _ value: String) {
        span.attributes[name] = value
    }

    func addEvent(_ name: String) {
        span.addEvent(SpanEvent(name: name))
    }

    func recordError(_ error: any Error) {
        span.recordError(error)
    }

    func setErrorStatus() {
        span.setStatus(SpanStatus(code: .error))
    }

    func end() {
        span.end()
    }

    var context: TaskTraceContext {
        TaskTraceContext(span.context)
    }

    func addLink(to context: TaskTraceContext) {
        guard let target = context.value as? InstrumentationContext else { return }
        span.addLink(SpanLink(context: target, attributes: [:]))
    }

    func propagationHeaders() -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = []
        instrument.inject(span.context, into: &headers, using: HeaderInjector())
        return headers
    }

    func withCurrent<R>(isolation: isolated (any Actor)?, _ body: () async throws -> R) async rethrows -> R {
        try await InstrumentationContext.withValue(span.context, isolation: isolation, operation: body)
    }
}

/// Collects an instrument's propagation values as header fields.
struct HeaderInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [(name: String, value: String)]) {
        carrier.append((key, value))
    }
}

#endif
