/// The instrumentation seam between TaskKit's components and a tracing library.
///
/// `TaskKit` and `TaskKitHTTP` start their spans through this protocol only; `TaskKitTracing`
/// implements it on a swift-distributed-tracing `Tracer`. A component holds it as
/// `(any TaskTracer)?`, `nil` without tracing, so that an untraced path costs a `nil` check.
package protocol TaskTracer: Sendable {
    /// The instrumentation context of the calling task, to be the parent of the spans of the work
    /// it requests (which runs in other tasks).
    func currentContext() -> TaskTraceContext

    /// Starts a span; the caller ends it.
    ///
    /// - Parameters:
    ///   - name: The operation name.
    ///   - kind: What the span stands for.
    ///   - parent: A context from ``currentContext()``; `nil` starts a root span.
    func startSpan(_ name: String, kind: TaskSpanKind, parent: TaskTraceContext?) -> any TaskSpan
}

/// An instrumentation context captured by ``TaskTracer/currentContext()``, opaque to TaskKit.
///
/// A class: a task box holds it as one optional reference, which costs an untraced task less
/// than an optional existential (Benchmarks/NOTES.md).
package final class TaskTraceContext: Sendable {
    /// The tracing library's context value.
    package let value: any Sendable

    package init(_ value: any Sendable) {
        self.value = value
    }
}

/// The kinds of span TaskKit starts.
package enum TaskSpanKind: Sendable {
    /// Work inside the process: a managed task, a MonoTask execution, a KeyedMonoTask load.
    case `internal`
    /// An outgoing request: one HTTP attempt.
    case client
}

/// A span started by a ``TaskTracer``.
package protocol TaskSpan: Sendable {
    /// Sets an integer attribute.
    func setAttribute(_ name: String, _ value: Int)
    /// Sets a string attribute.
    func setAttribute(_ name: String, _ value: String)
    /// Adds a named event.
    func addEvent(_ name: String)
    /// Records an error (without changing the status).
    func recordError(_ error: any Error)
    /// Sets the error status.
    func setErrorStatus()
    /// Ends the span.
    func end()
    /// The span's own context, to link other spans to it.
    var context: TaskTraceContext { get }
    /// Links the span to the span whose ``context`` is `context` (work it waited for, that ran
    /// under another parent).
    func addLink(to context: TaskTraceContext)
    /// The propagation headers of the span's context (W3C `traceparent` with a W3C instrument),
    /// to be sent with an outgoing request.
    func propagationHeaders() -> [(name: String, value: String)]
    /// Runs `body` with the span's context as the task's current instrumentation context, so
    /// that spans started inside it (by the user's code, or by a transport) are its children.
    func withCurrent<R>(isolation: isolated (any Actor)?, _ body: () async throws -> R) async rethrows -> R
}

extension TaskTracer {
    /// Runs `body` in an internal span named `name`, a child of `parent`, current while `body`
    /// runs; ends the span when `body` returns.
    func withInternalSpan<R>(
        _ name: String, parent: TaskTraceContext?, isolation: isolated (any Actor)? = #isolation,
        _ body: (any TaskSpan) async -> R
    ) async -> R {
        let span = startSpan(name, kind: .internal, parent: parent)
        let result = await span.withCurrent(isolation: isolation) { await body(span) }
        span.end()
        return result
    }
}

extension TaskSpan {
    /// Records a failure: the error, and the error status.
    package func recordFailure(_ error: any Error) {
        recordError(error)
        setErrorStatus()
    }
}

/// What a MonoTask or KeyedMonoTask load reports to its span. The load's loop is generic
/// over it, so that without a tracer (``UntracedRun``, empty) it compiles to the loop with no
/// tracing at all: no larger async frame, hence no extra allocation per run.
@usableFromInline
protocol RunSpan {
    /// An attempt failed and is retried.
    func retried()
    /// The load ended with `result`, delivered to `callers` callers (the one that started it and
    /// those that joined it).
    func finished<Value>(_ result: Result<Value, any Error>, callers: Int)
}

/// No span.
@usableFromInline
struct UntracedRun: RunSpan {
    @inlinable init() {}
    @inlinable func retried() {}
    @inlinable func finished<Value>(_ result: Result<Value, any Error>, callers: Int) {}
}

/// A span: a `retry` event per retry; the outcome and `taskkit.monotask.callers` at the end.
struct TracedRun: RunSpan {
    let span: any TaskSpan

    func retried() {
        span.addEvent("retry")
    }

    func finished<Value>(_ result: Result<Value, any Error>, callers: Int) {
        span.setAttribute("taskkit.monotask.callers", callers)
        if case .failure(let error) = result { span.recordFailure(error) }
    }
}
