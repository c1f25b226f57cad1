import DequeModule

/// The rules of ``HostConcurrencyLimit``, as a pure value type (no lock, no task, no clock):
/// which attempt takes a slot of its host, which waits, which is refused, and who gets a slot
/// that is given back.
///
/// A waiter is an opaque value (a continuation in production, anything in tests) that the
/// machine hands back exactly once: from ``acquire(host:id:waiter:)`` refused or granted at
/// once (the owner resumes it), from ``release(host:)`` (granted the freed slot) or from
/// ``leave(host:id:)`` (its caller left), never from two of them.
///
/// Rules:
/// - An attempt takes a slot when its host has fewer than `maximumInFlight` in flight and no
///   attempt waiting (first in, first out: a newcomer never overtakes a waiting attempt).
/// - Otherwise it waits at the end of its host's queue, or is refused when `maximumQueued`
///   attempts already wait.
/// - A released slot goes to the first waiting attempt, which is then in flight (the host's
///   count in flight does not change); with none waiting the count drops.
/// - An attempt that leaves (cancelled, its deadline passed) is taken out of the queue; one that
///   already has a slot is not in the queue, and gives its slot back with `release`.
/// - A host with nothing in flight and nothing waiting is forgotten.
struct HostConcurrencyStateMachine<Waiter> {
    struct Host {
        var inFlight = 0
        var queue: Deque<(id: UInt64, waiter: Waiter)> = []
    }

    enum AcquireAction: Equatable {
        /// The attempt has a slot: the owner resumes it.
        case granted
        /// The attempt waits; `position` attempts wait for this host, itself included.
        case queued(position: Int)
        /// The host's queue is full: the owner fails the attempt.
        case rejected
    }

    let limit: HostConcurrencyLimit
    private(set) var hosts: [String: Host] = [:]

    init(limit: HostConcurrencyLimit) {
        self.limit = limit
    }

    /// An attempt to `host` takes a slot if one is free and nobody waits; `false` (nothing
    /// changed) otherwise. The owner's path without a waiter.
    mutating func acquireAtOnce(host: String) -> Bool {
        guard let current = hosts[host] else {
            hosts[host] = Host(inFlight: 1)
            return true
        }
        guard current.inFlight < limit.maximumInFlight, current.queue.isEmpty else { return false }
        hosts[host]!.inFlight += 1
        return true
    }

    /// Attempt `id` to `host`, represented by `waiter`, arrives: granted, queued or rejected.
    /// Only a queued attempt's waiter is kept.
    mutating func acquire(host: String, id: UInt64, waiter: Waiter) -> AcquireAction {
        if acquireAtOnce(host: host) { return .granted }
        let waiting = hosts[host]!.queue.count
        guard waiting < limit.maximumQueued else { return .rejected }
        hosts[host]!.queue.append((id, waiter))
        return .queued(position: waiting + 1)
    }

    /// An attempt to `host` gave its slot back: the waiter now granted it, if any.
    mutating func release(host: String) -> Waiter? {
        guard hosts[host] != nil else { return nil }
        if let next = hosts[host]!.queue.popFirst() { return next.waiter }
        hosts[host]!.inFlight -= 1
        if hosts[host]!.inFlight == 0 { hosts[host] = nil }
        return nil
    }

    /// Attempt `id` to `host` leaves: its waiter when it was still waiting, `nil` when it was
    /// already granted a slot (or never queued).
    mutating func leave(host: String, id: UInt64) -> Waiter? {
        guard let index = hosts[host]?.queue.firstIndex(where: { $0.id == id }) else { return nil }
        return hosts[host]!.queue.remove(at: index).waiter
    }

    /// How many attempts wait for `host`.
    func waiting(for host: String) -> Int { hosts[host]?.queue.count ?? 0 }

    /// How many attempts to `host` are in flight.
    func inFlight(to host: String) -> Int { hosts[host]?.inFlight ?? 0 }
}
