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
    ///
    /// Each call hashes `host` once: the host's state is modified in place (a new host starts
    /// with nothing in flight, so it always has a free slot: `maximumInFlight` ≥ 1).
    mutating func acquireAtOnce(host: String) -> Bool {
        let maximumInFlight = limit.maximumInFlight
        return Self.takeSlot(of: &hosts[host, default: Host()], maximumInFlight: maximumInFlight)
    }

    /// Attempt `id` to `host`, represented by `waiter`, arrives: granted, queued or rejected.
    /// Only a queued attempt's waiter is kept.
    mutating func acquire(host: String, id: UInt64, waiter: Waiter) -> AcquireAction {
        let limit = self.limit
        return Self.acquire(&hosts[host, default: Host()], id: id, waiter: waiter, limit: limit)
    }

    /// An attempt to `host` gave its slot back: the waiter now granted it, if any.
    mutating func release(host: String) -> Waiter? {
        guard let index = hosts.index(forKey: host) else { return nil }
        if let next = hosts.values[index].queue.popFirst() { return next.waiter }
        hosts.values[index].inFlight -= 1
        if hosts.values[index].inFlight == 0 { hosts.remove(at: index) }
        return nil
    }

    /// Attempt `id` to `host` leaves: its waiter when it was still waiting, `nil` when it was
    /// already granted a slot (or never queued).
    mutating func leave(host: String, id: UInt64) -> Waiter? {
        guard let index = hosts.index(forKey: host),
            let position = hosts.values[index].queue.firstIndex(where: { $0.id == id })
        else { return nil }
        return hosts.values[index].queue.remove(at: position).waiter
    }

    private static func takeSlot(of host: inout Host, maximumInFlight: Int) -> Bool {
        guard host.inFlight < maximumInFlight, host.queue.isEmpty else { return false }
        host.inFlight += 1
        return true
    }

    private static func acquire(_ host: inout Host, id: UInt64, waiter: Waiter, limit: HostConcurrencyLimit) -> AcquireAction {
        if takeSlot(of: &host, maximumInFlight: limit.maximumInFlight) { return .granted }
        let waiting = host.queue.count
        guard waiting < limit.maximumQueued else { return .rejected }
        host.queue.append((id, waiter))
        return .queued(position: waiting + 1)
    }

    /// How many attempts wait for `host`.
    func waiting(for host: String) -> Int { hosts[host]?.queue.count ?? 0 }

    /// How many attempts to `host` are in flight.
    func inFlight(to host: String) -> Int { hosts[host]?.inFlight ?? 0 }
}
