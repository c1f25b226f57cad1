import Foundation

// The original libraries' names where TaskKit's own differ, as thin aliases so that a port is
// mostly an import change. Each is documented with the name it stands for; the migration
// articles in TaskKit.docc list them.

extension RetryCount {
    /// Monstra's nested name for ``IntervalProxy``: `RetryCount.IntervalProxy.exponentialBackoff(…)`
    /// and ``IntervalProxy`` are the same type.
    public typealias IntervalProxy = TaskKit.IntervalProxy
}

extension IntervalProxy {
    /// Monstra's name for ``defaultInitialTimeInterval`` (1 second).
    public static var DefaultInitialTimeInterval: TimeInterval { defaultInitialTimeInterval }

    /// Monstra's name for ``defaultScaleRate`` (2).
    public static var DefaultExponentialBackoffScaleRate: Double { defaultScaleRate }
}

extension TaskStore {
    /// The published TaskStore package's name for ``runningKeys``.
    public var runningTaskKeys: Set<Key> { runningKeys }
}
