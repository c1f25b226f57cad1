#if PostgreSQL
/// An error of ``PostgresSingleFlight`` itself; a `load` closure's own errors reach its callers
/// unchanged.
public enum PostgresSingleFlightError: Error, Sendable, CustomStringConvertible {
    /// A statement did not complete in time: the database is unreachable, or accepts connections
    /// and does not answer.
    ///
    /// Every statement is bounded by the lease, at most 10 seconds (postgres-nio's connection pool
    /// alone would keep a request waiting about 60 seconds for an unreachable database).
    /// - `statement`: what the statement was for (`"read"`, `"claim"`, `"store"`, …).
    /// - `after`: the bound that passed.
    case databaseTimeout(statement: String, after: Duration)

    /// The database, or the connection to it, failed a statement.
    /// - `statement`: what the statement was for (`"read"`, `"claim"`, `"store"`, …).
    /// - `underlying`: postgres-nio's error (usually a `PSQLError`).
    case databaseFailure(statement: String, underlying: any Error)

    /// The result another caller in this process was given does not decode as this caller's
    /// `Value` type: two callers of one key asked for different types.
    ///
    /// Callers of one key are merged inside a process, and the first one's `load` and `Value`
    /// type are used; give every caller of a key the same `Value` type.
    case valueDoesNotDecode(underlying: any Error)

    /// A description naming the case and its details.
    public var description: String {
        switch self {
        case let .databaseTimeout(statement, after):
            "PostgresSingleFlight: the \(statement) statement did not complete within \(after)"
        case let .databaseFailure(statement, underlying):
            "PostgresSingleFlight: the \(statement) statement failed: \(String(reflecting: underlying))"
        case let .valueDoesNotDecode(underlying):
            "PostgresSingleFlight: the merged result does not decode as this caller's type: \(underlying)"
        }
    }
}

#endif
