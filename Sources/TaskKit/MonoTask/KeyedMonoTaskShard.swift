/// One shard of a ``KeyedMonoTask``: its state machine and the lock that guards it, in one
/// object.
///
/// The lock is ``FutureLock`` stored inline (`ParkingMutex` on Linux: one atomic word, a bounded
/// spin, then parking), not a ``LockedState``: a hit is a critical section of a few loads, and on
/// a contended shard `pthread_mutex_t` puts a waiter to sleep in the kernel at once, where a
/// short spin finds the lock free (figures: `Benchmarks/NOTES.md`, issue 35). The rules are
/// `LockedState`'s: the closure computes an action and never runs user code, resumes a
/// continuation or takes another lock.
@usableFromInline
final class KeyedMonoTaskShard<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline typealias Machine = KeyedMonoTaskStateMachine<Key, Value, MonoWaiter<Value>>

    @usableFromInline let lock = FutureLock()
    /// The shard's state. `nonisolated(unsafe)` and `@exclusivity(unchecked)` are sound: the
    /// only access is ``withLock(_:)``, which holds `lock` for the whole access, so accesses
    /// never overlap and each is published to the next holder by the lock's acquire and
    /// release; the dynamic exclusivity check would only repeat what the lock guarantees.
    @usableFromInline @exclusivity(unchecked) nonisolated(unsafe) var machine: Machine

    init(_ machine: Machine) {
        self.machine = machine
    }

    /// Runs `body` with exclusive access to the machine and returns what it returns.
    @inlinable
    func withLock<R: Sendable>(_ body: (inout Machine) -> R) -> R {
        lock.withLock(self) { body(&machine) }
    }
}
