import Synchronization

/// The lock stored inline in every ``CoFuture``, `OneShot` and `KeyedMonoTask` shard, so that
/// each is one allocation (and a cache hit calls into no C lock).
///
/// On Apple platforms it is `Synchronization.Mutex`, which is `os_unfair_lock` stored inline
/// (priority-donating, and visible to ThreadSanitizer there). Elsewhere it is ``ParkingMutex``,
/// one atomic word with a futex-style protocol whose waiters park instead of spinning: on Linux
/// `Synchronization.Mutex` is invisible to ThreadSanitizer. Both are used only through
/// ``withLock(_:_:)``, whose closure must not run user code, resume a continuation or take
/// another future's lock (it computes an action; the caller performs it after unlocking).
@usableFromInline
struct FutureLock: ~Copyable, Sendable {
    #if canImport(Darwin)
    @usableFromInline let mutex = Mutex<Void>(())

    @inlinable init() {}

    /// Runs `body` while holding the lock. `owner` is the object that stores the lock.
    @inlinable @inline(__always)
    func withLock<R: Sendable>(_ owner: AnyObject, _ body: () -> R) -> R {
        mutex.withLock { _ in body() }
    }

    /// Runs `body` while holding the lock. `parkingKey` identifies the lock to the parking lot
    /// (not used here).
    @inlinable @inline(__always)
    func withLock<R: Sendable>(parkingKey: ObjectIdentifier, _ body: () -> R) -> R {
        mutex.withLock { _ in body() }
    }
    #else
    @usableFromInline let mutex = ParkingMutex()

    @inlinable init() {}

    /// Runs `body` while holding the lock. `owner` is the object that stores the lock.
    @inlinable @inline(__always)
    func withLock<R: Sendable>(_ owner: AnyObject, _ body: () -> R) -> R {
        withLock(parkingKey: ObjectIdentifier(owner), body)
    }

    /// Runs `body` while holding the lock. `parkingKey` identifies the lock to the parking lot:
    /// the identifier of an object that lives as long as the lock, and no other lock's.
    @inlinable @inline(__always)
    func withLock<R: Sendable>(parkingKey: ObjectIdentifier, _ body: () -> R) -> R {
        mutex.lock(parkingKey)
        defer { mutex.unlock(parkingKey) }
        return body()
    }
    #endif
}
