import Synchronization

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#endif

/// The lock embedded in every ``CoFuture``: no allocation of its own.
///
/// Why not ``LockedState`` (TaskKit's lock for everything else)? A future is created per
/// operation, and the benchmark budget is under two allocations per future. `LockedState` costs
/// one allocation per lock; a `pthread_mutex_t` cannot live inside a Swift class (its address is
/// not guaranteed stable). `Atomic` can: it is `~Copyable` with a stable address when stored in
/// a class's `let`. So this is a test-and-test-and-set lock over `Atomic<Bool>`:
///
/// - The critical sections it guards are a handful of loads and stores on the future's fields
///   (set the result, swap the callback list out, append one callback); no user code, no
///   continuation resume, no allocation-heavy work. Contention is therefore brief.
/// - Contended waiters spin briefly, then call `sched_yield()` so a preempted holder can run.
/// - Acquire on lock, release on unlock: ThreadSanitizer sees these atomics (they are inlined
///   into TaskKit's own instrumented code), so it understands the happens-before edges.
///
/// On Apple platforms a yielding spin lock can suffer priority inversion under QoS, so there
/// the same API wraps `os_unfair_lock` via `Synchronization.Mutex` (which is `os_unfair_lock`
/// inline, with a stable address, and visible to ThreadSanitizer on Darwin).
@usableFromInline
struct FutureLock: ~Copyable, Sendable {
    #if canImport(Darwin)
    @usableFromInline let mutex = Mutex<Void>(())

    @inlinable init() {}

    /// Runs `body` while holding the lock.
    @inlinable
    func withLock<R: Sendable>(_ body: () -> R) -> R {
        mutex.withLock { _ in body() }
    }

    /// Takes the lock; the caller must call ``unlock()`` on every path. For the one caller that
    /// must move a value into the guarded state (a closure could only borrow it): `_add`.
    /// (`_unsafeLock`/`_unsafeUnlock` are the standard library's lock/unlock of a
    /// `Mutex<Void>`, public since Swift 6.0 and emitted into the client.)
    @inlinable
    func lock() {
        mutex._unsafeLock()
    }

    /// Releases the lock taken by ``lock()``.
    @inlinable
    func unlock() {
        mutex._unsafeUnlock()
    }
    #else
    @usableFromInline let locked = Atomic<Bool>(false)

    @inlinable init() {}

    /// Runs `body` while holding the lock.
    @inlinable
    func withLock<R>(_ body: () -> R) -> R {
        lock()
        defer { unlock() }
        return body()
    }

    /// Takes the lock; the caller must call ``unlock()`` on every path. For the one caller that
    /// must move a value into the guarded state (a closure could only borrow it): `_add`.
    @inlinable
    func lock() {
        if locked.compareExchange(
            expected: false, desired: true, successOrdering: .acquiring, failureOrdering: .relaxed
        ).exchanged {
            return
        }
        lockSlowPath()
    }

    @usableFromInline
    func lockSlowPath() {
        var spins = 0
        while true {
            // Test before test-and-set: spin on a plain load so waiters do not bounce the line.
            if !locked.load(ordering: .relaxed),
                locked.compareExchange(
                    expected: false, desired: true, successOrdering: .acquiring, failureOrdering: .relaxed
                ).exchanged
            {
                return
            }
            spins += 1
            if spins >= 64 {
                sched_yield()
            }
        }
    }

    /// Releases the lock taken by ``lock()``.
    @inlinable
    func unlock() {
        locked.store(false, ordering: .releasing)
    }
    #endif
}
