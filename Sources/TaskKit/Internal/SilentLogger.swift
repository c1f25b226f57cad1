import Logging

extension Logger {
    /// A logger that discards every message: the default logger of every TaskKit component
    /// (TaskKit, TaskKitHTTP), labelled with the component's name.
    @usableFromInline
    package static func silent(label: String) -> Logger {
        Logger(label: label, factory: { _ in SwiftLogNoOpLogHandler() })
    }
}
