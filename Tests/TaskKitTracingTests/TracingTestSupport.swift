#if Tracing
import InMemoryTracing
import Tracing

/// swift-distributed-tracing's `InMemoryTracer` with W3C propagation: it records spans as the
/// in-memory tracer does (with W3C-shaped identifiers), and injects the W3C `traceparent` of the
/// span in the context, as an OpenTelemetry tracer does (the in-memory tracer's own keys are not a
/// propagation format servers read).
struct W3CInMemoryTracer: Tracer {
    let recorder = InMemoryTracer(
        idGenerator: InMemoryTracer.IDGenerator(nextTraceID: { randomHex(count: 32) }, nextSpanID: { randomHex(count: 16) })
    )

    var finishedSpans: [FinishedInMemorySpan] { recorder.finishedSpans }

    func startSpan<Instant: TracerInstant>(
        _ operationName: String,
        context: @autoclosure () -> InstrumentationContext,
        ofKind kind: SpanKind,
        at instant: @autoclosure () -> Instant,
        function: String,
        file fileID: String,
        line: UInt
    ) -> InMemorySpan {
        recorder.startSpan(
            operationName, context: context(), ofKind: kind, at: instant(), function: function, file: fileID, line: line
        )
    }

    func forceFlush() {}

    func inject<Carrier, Inject: Injector>(
        _ context: InstrumentationContext, into carrier: inout Carrier, using injector: Inject
    ) where Inject.Carrier == Carrier {
        guard let span = context.inMemorySpanContext else { return }
        injector.inject("00-\(span.traceID)-\(span.spanID)-01", forKey: "traceparent", into: &carrier)
    }

    func extract<Carrier, Extract: Extractor>(
        _ carrier: Carrier, into context: inout InstrumentationContext, using extractor: Extract
    ) where Extract.Carrier == Carrier {}
}

private func randomHex(count: Int) -> String {
    let digits = Array("0123456789abcdef")
    return String((0..<count).map { _ in digits.randomElement()! })
}

/// The span ID of `span`'s context.
func spanID(of span: any Span) -> String? {
    span.context.inMemorySpanContext?.spanID
}
#endif
