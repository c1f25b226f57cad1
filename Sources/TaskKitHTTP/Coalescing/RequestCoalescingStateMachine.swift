/// The rules of request coalescing, as a pure value type (no locks, no tasks): which caller
/// starts a flight, which joins one, and what happens when callers leave or a flight ends.
///
/// A waiter is an opaque value (a continuation and what it needs to start a flight, in
/// production; anything in tests) that the machine hands back for the owner to resume after
/// unlocking.
///
/// Rules:
/// - A caller whose key has no flight starts one; a caller whose key has a live flight joins it.
/// - A caller that leaves (its task cancelled, its deadline passed) is removed and handed back.
///   When the last caller of a flight leaves, the flight is abandoned: the owner cancels it, and
///   it keeps its key until it ends, so that no caller ever joins a flight that is being
///   cancelled and no second flight for the key starts while the first still runs. Callers that
///   arrive meanwhile queue behind it.
/// - Only the flight removes its entry, when it ends (by its id, so an old flight never removes
///   a newer one): its callers get its outcome, and callers queued behind an abandoned flight
///   start the next flight.
struct RequestCoalescingStateMachine<Key: Hashable, Waiter> {
    struct Flight {
        var id: UInt64
        var waiters: [(id: UInt64, waiter: Waiter)]
        /// The last caller left: the flight is being cancelled.
        var abandoned = false
        /// Callers that arrived after it was abandoned: they start the next flight.
        var queued: [(id: UInt64, waiter: Waiter)] = []
    }

    enum JoinAction {
        /// Start flight `flight` with this caller's request.
        case start(flight: UInt64)
        /// The caller joined flight `flight`.
        case joined(flight: UInt64)
        /// The caller waits for an abandoned flight to end, then starts or joins the next one.
        case queued
    }

    private(set) var flights: [Key: Flight] = [:]
    private var nextFlight: UInt64 = 1

    /// A caller with `key` arrives.
    ///
    /// Flights are changed in place in the dictionary (`flights[key]!.…`): a copy taken out and
    /// stored back would copy its waiter array on every join, quadratic in the callers.
    mutating func join(key: Key, id: UInt64, waiter: Waiter) -> JoinAction {
        guard let (flight, abandoned) = flights[key].map({ ($0.id, $0.abandoned) }) else {
            let flight = nextFlight
            nextFlight += 1
            flights[key] = Flight(id: flight, waiters: [(id, waiter)])
            return .start(flight: flight)
        }
        if abandoned {
            flights[key]!.queued.append((id, waiter))
            return .queued
        }
        flights[key]!.waiters.append((id, waiter))
        return .joined(flight: flight)
    }

    /// Caller `id` of `key` leaves: its waiter (`nil` if it was already answered), and the id of
    /// the flight to cancel when it was the flight's last caller.
    mutating func leave(key: Key, id: UInt64) -> (waiter: Waiter?, abandon: UInt64?) {
        guard flights[key] != nil else { return (nil, nil) }
        if let index = flights[key]!.waiters.firstIndex(where: { $0.id == id }) {
            let waiter = flights[key]!.waiters.remove(at: index).waiter
            guard flights[key]!.waiters.isEmpty, !flights[key]!.abandoned else { return (waiter, nil) }
            flights[key]!.abandoned = true
            return (waiter, flights[key]!.id)
        }
        if let index = flights[key]!.queued.firstIndex(where: { $0.id == id }) {
            return (flights[key]!.queued.remove(at: index).waiter, nil)
        }
        return (nil, nil)
    }

    /// Flight `flight` of `key` ended: the waiters to answer with its outcome, and, when callers
    /// queued behind it, the id of the next flight and the waiter whose request starts it (it
    /// stays a waiter of that flight).
    mutating func finish(key: Key, flight: UInt64) -> (waiters: [Waiter], next: (flight: UInt64, starter: Waiter)?) {
        guard let ended = flights[key], ended.id == flight else { return ([], nil) }
        let waiters = ended.waiters.map(\.waiter)
        guard let first = ended.queued.first else {
            flights[key] = nil
            return (waiters, nil)
        }
        let next = nextFlight
        nextFlight += 1
        flights[key] = Flight(id: next, waiters: ended.queued)
        return (waiters, (next, first.waiter))
    }
}
