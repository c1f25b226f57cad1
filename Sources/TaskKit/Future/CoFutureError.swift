/// Errors produced by ``CoFuture`` and ``CoPromise`` themselves.
public enum CoFutureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The future was cancelled, directly with ``CoFuture/cancel()``, through a future derived
    /// from it, or because its ``CoPromise`` was released without being completed.
    case cancelled
    /// A wait with a deadline (``CoFuture/value(timeout:clock:)``) ended before the future
    /// completed. The future itself is unaffected and still pending.
    case timeout

    public var description: String {
        switch self {
        case .cancelled: return "CoFutureError.cancelled"
        case .timeout: return "CoFutureError.timeout"
        }
    }
}
