/// How a ``TaskManager`` behaves while a ``Reactor`` runs.
public struct ReactorConfiguration: Sendable, Hashable {
    /// The longest the reaction may run; when it passes, the reaction is cancelled and the
    /// tasks it requeued fail with ``TaskError/reactorTimedOut(type:)``. `nil`: no limit.
    public var timeout: Duration?
    /// Whether the tasks that triggered the reaction run again once it succeeds (instead of
    /// delivering the result that triggered it).
    public var requeuesTask: Bool
    /// Whether no task starts executing while the reaction runs. Tasks already executing go on;
    /// tasks added meanwhile wait, un-intercepted, and start once every suspending reaction ended.
    public var suspendsTaskQueue: Bool
    /// Whether requeued tasks pass through the interceptors again before they rerun.
    public var reinterceptOnRequeue: Bool

    /// Creates a configuration.
    ///
    /// - Precondition: `timeout`, when given, is greater than zero.
    public init(
        timeout: Duration? = nil,
        requeuesTask: Bool = false,
        suspendsTaskQueue: Bool = false,
        reinterceptOnRequeue: Bool = false
    ) {
        if let timeout {
            precondition(timeout > .zero, "ReactorConfiguration: timeout must be > 0, got \(timeout)")
        }
        self.timeout = timeout
        self.requeuesTask = requeuesTask
        self.suspendsTaskQueue = suspendsTaskQueue
        self.reinterceptOnRequeue = reinterceptOnRequeue
    }

    /// No timeout, no requeue, no suspension, no re-interception.
    public static let `default` = ReactorConfiguration()
}
