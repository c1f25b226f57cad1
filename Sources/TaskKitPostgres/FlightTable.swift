#if PostgreSQL
import Foundation
import NIOConcurrencyHelpers

/// What a flight hands its callers: the encoded result, and the value it was decoded from or
/// loaded as (a caller of the same `Value` type takes it without decoding again).
struct FlightOutput: Sendable {
    let data: Data
    let value: any Sendable
}

/// The in-process merge of ``PostgresSingleFlight``: concurrent callers of one key share one
/// flight (one task that reads, claims, loads or waits in the database), so a process makes at
/// most one claim per key at a time.
///
/// - A caller joins the key's flight if there is one, else starts it with its own operation.
/// - A caller whose task is cancelled leaves at once with `CancellationError`; the flight goes on
///   for the others. When the last caller leaves, the flight leaves the table and its task is
///   cancelled (a later caller starts a new flight).
/// - When the flight ends, it leaves the table and every caller gets its result.
///
/// One lock guards the table; continuations are resumed and tasks created or cancelled only
/// after it is released.
final class FlightTable: Sendable {
    typealias Continuation = CheckedContinuation<FlightOutput, any Error>

    private struct Flight {
        let id: UInt64
        var waiters: [UInt64: Continuation] = [:]
        var task: Task<Void, Never>?
    }

    private struct State {
        var flights: [String: Flight] = [:]
        var nextID: UInt64 = 0
        /// Callers with an identifier that have not attached their continuation yet.
        var arriving: Set<UInt64> = []
        /// Callers cancelled before they attached their continuation.
        var cancelledEarly: Set<UInt64> = []
    }

    private let state = NIOLockedValueBox(State())

    /// How many flights are in progress.
    var count: Int { state.withLockedValue { $0.flights.count } }

    /// The result of the key's flight, joining it or starting it with `operation`.
    func output(
        forKey key: String,
        operation: @escaping @Sendable () async throws -> FlightOutput
    ) async throws -> FlightOutput {
        let waiterID = state.withLockedValue { state -> UInt64 in
            state.nextID += 1
            state.arriving.insert(state.nextID)
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: Continuation) in
                enum Attach { case cancelled, joined, started(flightID: UInt64) }
                let attach = state.withLockedValue { state -> Attach in
                    state.arriving.remove(waiterID)
                    if state.cancelledEarly.remove(waiterID) != nil { return .cancelled }
                    if state.flights[key] != nil {
                        state.flights[key]!.waiters[waiterID] = continuation
                        return .joined
                    }
                    state.nextID += 1
                    var flight = Flight(id: state.nextID)
                    flight.waiters[waiterID] = continuation
                    state.flights[key] = flight
                    return .started(flightID: flight.id)
                }
                switch attach {
                case .cancelled:
                    continuation.resume(throwing: CancellationError())
                case .joined:
                    break
                case let .started(flightID):
                    let task = Task {
                        let result: Result<FlightOutput, any Error>
                        do {
                            result = .success(try await operation())
                        } catch {
                            result = .failure(error)
                        }
                        self.finish(key: key, flightID: flightID, with: result)
                    }
                    let keep = state.withLockedValue { state -> Bool in
                        guard state.flights[key]?.id == flightID else { return false }
                        state.flights[key]!.task = task
                        return true
                    }
                    if !keep { task.cancel() }
                }
            }
        } onCancel: {
            self.cancel(waiterID: waiterID, key: key)
        }
    }

    private func finish(key: String, flightID: UInt64, with result: Result<FlightOutput, any Error>) {
        let waiters = state.withLockedValue { state -> [Continuation] in
            guard let flight = state.flights[key], flight.id == flightID else { return [] }
            state.flights[key] = nil
            return Array(flight.waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result) }
    }

    private func cancel(waiterID: UInt64, key: String) {
        let (waiter, task) = state.withLockedValue { state -> (Continuation?, Task<Void, Never>?) in
            if state.arriving.remove(waiterID) != nil {
                state.cancelledEarly.insert(waiterID)
                return (nil, nil)
            }
            guard let waiter = state.flights[key]?.waiters.removeValue(forKey: waiterID) else {
                return (nil, nil)
            }
            guard state.flights[key]!.waiters.isEmpty else { return (waiter, nil) }
            let task = state.flights[key]!.task
            state.flights[key] = nil
            return (waiter, task)
        }
        task?.cancel()
        waiter?.resume(throwing: CancellationError())
    }
}

#endif
