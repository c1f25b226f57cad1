/// Errors produced by ``CoFuture`` and ``CoPromise`` themselves.
public enum CoFutureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The future was cancelled, directly with ``CoFuture/cancel()``, through a future derived
    /// from it, or because its ``CoPromise`` was released without being completed.
    case canceled

    public var description: String {
        switch self {
        case .canceled: return "CoFutureError.canceled"
        }
    }
}
