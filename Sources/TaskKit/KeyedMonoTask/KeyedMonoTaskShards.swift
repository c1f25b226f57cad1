/// One shard of a ``KeyedMonoTask``: its state machine and the lock that guards it, an element
/// of ``KeyedMonoTaskShards``.
///
/// The lock is ``FutureLock`` stored inline (`ParkingMutex` on Linux: one atomic word, a bounded
/// spin, then parking), not a ``LockedState``: a hit is a critical section of a few loads, and on
/// a contended shard `pthread_mutex_t` puts a waiter to sleep in the kernel at once, where a
/// short spin finds the lock free (figures: `Benchmarks/NOTES.md`, issue 35). The rules are
/// `LockedState`'s: the closure computes an action and never runs user code, resumes a
/// continuation or takes another lock.
@usableFromInline
struct KeyedMonoTaskShard<Key: Hashable & Sendable, Value: Sendable>: ~Copyable {
    @usableFromInline typealias Machine = KeyedMonoTaskStateMachine<Key, Value, MonoWaiter<Value>>

    /// First: `withLock` reaches it as `pointee.machine`, an access that ThreadSanitizer records
    /// at the element's own address; were the lock word there, every critical section would
    /// look to it like a write racing with the lock's atomics.
    @usableFromInline var machine: Machine
    @usableFromInline let lock = FutureLock()
    /// The object whose identifier names `lock` to the parking lot (the shards share one
    /// allocation, so each needs an identity of its own), and that identifier.
    let parker = KeyedMonoTaskShardParker()
    @usableFromInline let parkingKey: ObjectIdentifier

    init(_ machine: Machine) {
        self.machine = machine
        self.parkingKey = ObjectIdentifier(parker)
    }
}

/// The identity of one shard's lock in the parking lot.
final class KeyedMonoTaskShardParker: Sendable {}

/// The shards of a ``KeyedMonoTask``, stored inline in one allocation that the cache holds in a
/// `let`.
///
/// One object for all shards, not one object per shard: a call reaches its shard's lock through
/// the cache's `let` property, which the compiler borrows for the call, so a hit retains and
/// releases nothing. A shard object taken out of an array was retained and released around
/// every critical section (the lock's slow paths are opaque calls, across which the compiler
/// cannot prove that the array keeps the object), two more atomic writes per hit to the line of
/// the shard's lock (issue 35, `Benchmarks/NOTES.md`).
@usableFromInline
struct KeyedMonoTaskShards<Key: Hashable & Sendable, Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable is sound: the storage's header (the shard count) is written once, in
    // `init`, before the value is shared, and only read after; a shard's machine is reached only
    // through `withLock(_:_:)`, which holds that shard's lock for the whole access, so accesses
    // to one machine never overlap and each is published to the next holder by the lock's
    // acquire and release; a shard's lock and parking key are never written.
    @usableFromInline typealias Machine = KeyedMonoTaskStateMachine<Key, Value, MonoWaiter<Value>>

    @usableFromInline let storage: KeyedMonoTaskShardStorage<Key, Value>
    /// The number of shards (also the storage's header, which is a class's stored property: a
    /// read of it there is an exclusivity check).
    @usableFromInline let count: Int

    /// `count` shards, the machine of shard `index` made by `machine(index)`.
    init(count: Int, machine: (Int) -> Machine) {
        storage = KeyedMonoTaskShardStorage.make(count: count, machine: machine)
        self.count = count
    }

    /// Runs `body` with exclusive access to the machine of shard `index` (`0..<count`) and
    /// returns what it returns.
    @inlinable
    func withLock<R: Sendable>(_ index: Int, _ body: (inout Machine) -> R) -> R {
        precondition(UInt(bitPattern: index) < UInt(bitPattern: count), "KeyedMonoTask: no shard \(index)")
        return storage.withLock(index, body)
    }
}

/// The allocation behind ``KeyedMonoTaskShards``: the shard count in the header, the shards as
/// the elements (an element of a `ManagedBuffer` stays at one address for the buffer's life, as
/// a lock needs).
@usableFromInline
final class KeyedMonoTaskShardStorage<Key: Hashable & Sendable, Value: Sendable>:
    ManagedBuffer<Int, KeyedMonoTaskShard<Key, Value>>
{
    @usableFromInline typealias Machine = KeyedMonoTaskStateMachine<Key, Value, MonoWaiter<Value>>

    static func make(count: Int, machine: (Int) -> Machine) -> KeyedMonoTaskShardStorage<Key, Value> {
        let buffer = Self.create(minimumCapacity: count) { _ in count }
        buffer.withUnsafeMutablePointerToElements { elements in
            // Each of the `count` elements `create` reserved is initialised once, in order.
            for index in 0..<count { (elements + index).initialize(to: KeyedMonoTaskShard(machine(index))) }
        }
        // `create` is a class method returning `ManagedBuffer<Int, KeyedMonoTaskShard<Key, Value>>`;
        // called on `Self` its dynamic type is `KeyedMonoTaskShardStorage<Key, Value>`, so the
        // downcast cannot fail.
        return unsafeDowncast(buffer, to: KeyedMonoTaskShardStorage<Key, Value>.self)
    }

    deinit {
        // The `header` elements `make` initialised, destroyed once, when nothing can reach them.
        withUnsafeMutablePointers { count, elements in _ = elements.deinitialize(count: count.pointee) }
    }

    /// ``KeyedMonoTaskShards/withLock(_:_:)``, whose caller checked that `index` is below the
    /// count.
    @inlinable
    func withLock<R: Sendable>(_ index: Int, _ body: (inout Machine) -> R) -> R {
        withUnsafeMutablePointerToElements { elements in
            // In bounds (checked by the caller) and initialised (by `make`, until `deinit`); the buffer is
            // alive for the call (`self`). The machine is written only while its shard's lock is
            // held; the lock and the key are never written.
            let shard = elements + index
            return shard.pointee.lock.withLock(parkingKey: shard.pointee.parkingKey) {
                body(&shard.pointee.machine)
            }
        }
    }
}
