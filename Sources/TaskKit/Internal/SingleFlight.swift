/// One load in flight, as ``MonoTaskStateMachine`` and ``KeyedMonoTaskStateMachine`` both keep
/// it: who its result goes to, and its place in its retry schedule. The single-flight rules the
/// two machines share live here, once:
///
/// - A caller arriving during the load joins it (``join(_:forced:)``) and gets its result, in the
///   order of arrival.
/// - A forced caller (`forceUpdate`) must not get the result of a load that began before its call:
///   it waits for the one load that follows this one, requested once however many forced callers
///   ask (``followUp``).
/// - A caller whose task is cancelled is taken out of whichever list holds it
///   (``remove(_:)``), exactly once.
/// - A failed attempt is retried while the policy allows (``nextRetryDelay(policy:jitter:)``);
///   the retries of one load are one schedule, whatever its owner does meanwhile.
///
/// What differs stays in each machine: when a forced caller may still join the current load
/// (``MonoTask``'s load that has not started, or whose result a restart discards), where loads
/// are stored, and what a result does to the cache.
@usableFromInline
struct SingleFlight<Waiter> {
    @usableFromInline typealias Entry = IdentifiedWaiter<Waiter>

    /// Served by this load's result, in the order they joined.
    @usableFromInline var waiters: [Entry]
    /// Forced callers that arrived after this load began: served by the load that follows it.
    /// Non-`nil` (possibly empty: a forced call that waits for nothing) means a follow-up is
    /// requested.
    @usableFromInline var followUp: [Entry]?
    /// Retries made so far, and the delay before the last: the load's place in the policy's
    /// schedule. Not a `RetrySchedule`, which holds the policy (over 100 bytes, copied with every
    /// load that starts or ends).
    @usableFromInline var retriesMade = 0
    @usableFromInline var lastRetryDelay: Duration?

    @inlinable
    init(waiters: [Entry]) {
        self.waiters = waiters
    }

    /// A caller joins: `entry` (`nil` for a call that waits for nothing) is served by this load,
    /// or, when `forced`, by the follow-up load, which this requests.
    @inlinable
    mutating func join(_ entry: Entry?, forced: Bool) {
        if forced {
            if followUp == nil { followUp = [] }
            if let entry { followUp!.append(entry) }
        } else if let entry {
            waiters.append(entry)
        }
    }

    /// Whether the waiter `id` is among the waiters or the follow-up's.
    func holds(_ id: UInt64) -> Bool {
        waiters.contains { $0.id == id } || followUp?.contains { $0.id == id } == true
    }

    /// Takes the waiter `id` out of the waiters or the follow-up's; `nil` when neither holds it
    /// (its result was delivered, or it was taken out before).
    @usableFromInline
    mutating func remove(_ id: UInt64) -> Waiter? {
        if let index = waiters.firstIndex(where: { $0.id == id }) {
            return waiters.remove(at: index).waiter
        }
        if let index = followUp?.firstIndex(where: { $0.id == id }) {
            return followUp!.remove(at: index).waiter
        }
        return nil
    }

    /// Every waiter, the follow-up's after the others: those a load that replaces this one serves
    /// (a restart), or those that fail with it (a cancellation).
    func allWaiters() -> [Entry] {
        guard let followUp else { return waiters }
        return waiters + followUp
    }

    /// An attempt failed: the delay before the next, counted as a retry made, or `nil` when
    /// `policy` allows no more and the failure is the load's result.
    @inlinable
    mutating func nextRetryDelay(policy: RetryCount, jitter: inout RetryJitter) -> Duration? {
        var schedule = RetrySchedule(policy: policy, retriesMade: retriesMade, lastDelay: lastRetryDelay)
        guard let delay = schedule.nextDelay(using: &jitter) else { return nil }
        retriesMade = schedule.retriesMade
        lastRetryDelay = schedule.lastDelay
        return delay
    }
}

extension SingleFlight: Sendable where Waiter: Sendable {}

/// How long a load's `result` asks to be kept, by the cache policies ``MonoTask`` and
/// ``KeyedMonoTask`` share: a success for what `expiry` says of it (`nil`: the configured time to
/// live), a failure for what `failureExpiry` says of it, never a `CancellationError`. Called by
/// the owners outside their locks: both closures are user code.
func keptFor<Value>(
    _ result: Result<Value, any Error>,
    expiry: ((Value) -> Duration?)?,
    failureExpiry: ((any Error) -> Duration?)?
) -> (value: Duration?, failure: Duration?) {
    switch result {
    case .success(let value):
        return (expiry?(value), nil)
    case .failure(let error) where !(error is CancellationError):
        return (nil, failureExpiry?(error))
    case .failure:
        return (nil, nil)
    }
}
