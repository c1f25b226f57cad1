import Logging
import TaskKit

/// A swift-log handler that keeps every record, and counts metadata writes.
public struct CapturingLogHandler: LogHandler {
    /// One log record: its level, message and metadata (the logger's merged with the record's).
    public struct Record: Sendable {
        public var level: Logger.Level
        public var message: String
        public var metadata: Logger.Metadata
    }

    /// What the handlers of one logger recorded.
    public final class Store: Sendable {
        let records = LockedState<[Record]>([])
        let metadataWrites = LockedState(0)

        /// Every record, in order.
        public var all: [Record] { records.withLock { $0 } }
        /// The `event` metadata of every record that has one, in order.
        public var events: [String] { all.compactMap { $0.metadata["event"].map { "\($0)" } } }
        /// How many times the logger's metadata was written (set or changed).
        public var metadataWriteCount: Int { metadataWrites.withLock { $0 } }
    }

    let store: Store
    public var logLevel: Logger.Level
    var metadataStorage: Logger.Metadata = [:]

    init(store: Store, level: Logger.Level) {
        self.store = store
        self.logLevel = level
    }

    public var metadata: Logger.Metadata {
        get { metadataStorage }
        set {
            store.metadataWrites.withLock { $0 += 1 }
            metadataStorage = newValue
        }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadataStorage[key] }
        set {
            store.metadataWrites.withLock { $0 += 1 }
            metadataStorage[key] = newValue
        }
    }

    public func log(event: LogEvent) {
        let merged = metadataStorage.merging(event.metadata ?? [:]) { $1 }
        store.records.withLock { $0.append(Record(level: event.level, message: event.message.description, metadata: merged)) }
    }

    /// A logger at `level` whose records go to the returned store.
    public static func logger(level: Logger.Level, label: String = "TaskKitTests") -> (Logger, Store) {
        let store = Store()
        let logger = Logger(label: label) { _ in CapturingLogHandler(store: store, level: level) }
        return (logger, store)
    }
}
