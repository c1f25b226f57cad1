#if PostgreSQL
import Foundation

/// What a flight hands its callers: the encoded result, and the value it was decoded from or
/// loaded as (a caller of the same `Value` type takes it without decoding again).
struct FlightOutput: Sendable {
    let data: Data
    let value: any Sendable
}

/// The key under which ``PostgresSingleFlight`` merges a process's callers in a `KeyedMonoTask`:
/// equal and hashed by the key's digest alone, it carries the flight of the caller that made it.
/// The load that the cache starts for a key runs the flight of the caller that started it, so a
/// flight runs with the first caller's `load`, `Value` type and time to live.
struct ProcessFlight: Hashable, Sendable {
    /// The key's digest, in hexadecimal.
    let key: String
    /// Starts the flight (reads, claims and loads, or waits, in the database), which reports
    /// its outcome to the completion exactly once.
    let start: @Sendable (_ completion: @escaping @Sendable (Result<FlightOutput, any Error>) -> Void) -> Void

    static func == (lhs: ProcessFlight, rhs: ProcessFlight) -> Bool { lhs.key == rhs.key }

    func hash(into hasher: inout Hasher) { hasher.combine(key) }
}
#endif
