import Logging

extension Logger {
    /// A logger that discards every message: the default logger of every TaskKit component
    /// (TaskKit, TaskKitHTTP, TaskKitPostgres), labelled with the component's name.
    ///
    /// ```swift
    /// let manager = TaskManager(logger: .silent(label: "checkout"))
    /// ```
    ///
    /// - Parameter label: The logger's label.
    public static func silent(label: String) -> Logger {
        Logger(label: label, factory: { _ in SwiftLogNoOpLogHandler() })
    }
}
