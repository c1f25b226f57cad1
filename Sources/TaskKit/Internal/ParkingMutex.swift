import Dispatch
import Synchronization

/// A mutex in one 32-bit atomic word, for objects that cannot afford a separate allocation for
/// their lock (every ``CoFuture``, `OneShot` and `KeyedMonoTask` shard has one; see `FutureLock`). Used on Linux, where
/// `Synchronization.Mutex` is invisible to ThreadSanitizer.
///
/// The protocol is the futex mutex of Rust's standard library and of Ulrich Drepper's "Futexes
/// Are Tricky": the word is 0 (unlocked), 1 (locked) or 2 (locked, and a thread may be
/// waiting).
///
/// - `lock()` is one compare-and-swap 0 → 1 when uncontended. Contended, it spins on the word
///   a bounded number of times (``spinLimit`` loads, a few microseconds: the critical sections it
///   guards are a few loads and stores, so a running holder is usually out by then), then swaps
///   in 2 and, while the word was not 0, parks until woken.
/// - `unlock()` swaps in 0; only if the word was 2 does it wake one parked thread, which swaps in
///   2 again (there may be more waiters), so every waiter is eventually woken by some unlock.
/// - Parking is done by ``ParkingLot`` instead of the `futex` system call (which Swift cannot
///   call without C): a thread parks only after re-checking, under the parking lot's lock, that
///   the word is still 2, and an unlocking thread sets the word to 0 *before* it takes that lock
///   to wake someone, so a wake-up cannot be lost between the check and the wait.
///
/// The acquiring exchange on `lock()` and the releasing exchange on `unlock()` order the
/// critical sections; ThreadSanitizer sees both (they are atomics inlined into TaskKit's own
/// instrumented code), so it understands the happens-before edges.
@usableFromInline
struct ParkingMutex: ~Copyable, Sendable {
    @usableFromInline let word = Atomic<UInt32>(0)

    @inlinable init() {}

    /// Takes the mutex. `key` identifies this mutex to the parking lot (the object that stores it).
    @inlinable
    func lock(_ key: ObjectIdentifier) {
        if word.compareExchange(expected: 0, desired: 1, successOrdering: .acquiring, failureOrdering: .relaxed)
            .exchanged
        {
            return
        }
        lockContended(key)
    }

    @usableFromInline @inline(never)
    func lockContended(_ key: ObjectIdentifier) {
        // A short, bounded spin first: the holder is most likely running and about to unlock.
        for _ in 0..<ParkingMutex.spinLimit {
            let current = word.load(ordering: .relaxed)
            if current == 2 { break }  // others are already parked: queue behind them
            if current == 0,
                word.compareExchange(expected: 0, desired: 1, successOrdering: .acquiring, failureOrdering: .relaxed)
                    .exchanged
            {
                return
            }
        }
        while word.exchange(2, ordering: .acquiring) != 0 {
            ParkingLot.park(key) { word.load(ordering: .relaxed) == 2 }
        }
    }

    /// Releases the mutex taken by ``lock(_:)`` with the same `key`.
    @inlinable
    func unlock(_ key: ObjectIdentifier) {
        if word.exchange(0, ordering: .releasing) == 2 {
            ParkingLot.unparkOne(key)
        }
    }

    @usableFromInline static var spinLimit: Int { 2_000 }
}

/// Where threads wait for a ``ParkingMutex``: a fixed table of buckets, each a list of parked
/// threads guarded by a ``LockedState`` (a platform mutex), chosen by the key's address.
/// A parked thread waits on a semaphore of its own; only the slow path of a contended mutex
/// comes here.
@usableFromInline
enum ParkingLot {
    struct Parked {
        let key: ObjectIdentifier
        let semaphore: DispatchSemaphore
    }

    static let bucketCount = 64
    static let buckets: [LockedState<[Parked]>] = (0..<bucketCount).map { _ in LockedState([]) }

    static func bucket(for key: ObjectIdentifier) -> LockedState<[Parked]> {
        buckets[Int((UInt(bitPattern: key) >> 4) % UInt(bucketCount))]
    }

    /// Blocks the calling thread until ``unparkOne(_:)`` is called with the same key, unless
    /// `shouldPark` (evaluated under the bucket's lock) returns false.
    @usableFromInline
    static func park(_ key: ObjectIdentifier, if shouldPark: () -> Bool) {
        let semaphore = DispatchSemaphore(value: 0)
        let parked = bucket(for: key).withLock { parked in
            guard shouldPark() else { return false }
            parked.append(Parked(key: key, semaphore: semaphore))
            return true
        }
        if parked { semaphore.wait() }
    }

    /// Wakes the longest-parked thread waiting with `key`, if any.
    @usableFromInline
    static func unparkOne(_ key: ObjectIdentifier) {
        let semaphore: DispatchSemaphore? = bucket(for: key).withLock { parked in
            guard let index = parked.firstIndex(where: { $0.key == key }) else { return nil }
            return parked.remove(at: index).semaphore
        }
        semaphore?.signal()
    }
}
