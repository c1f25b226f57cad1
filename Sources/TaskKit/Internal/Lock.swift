/// A value guarded by a platform mutex, stored together with the mutex in one allocation.
///
/// This is TaskKit's lock for component state (MonoTask, KeyedMonoTask, TaskStore's bookkeeping,
/// TaskManager, the HTTP layer, the test clock); ``CoFuture`` keeps its lock inline instead
/// (`FutureLock`), so that a future is one allocation. It wraps `pthread_mutex_t` on Linux and
/// `os_unfair_lock` on Apple platforms, both of which ThreadSanitizer understands; it is
/// deliberately not `Synchronization.Mutex`, whose Linux implementation ThreadSanitizer cannot
/// see (see ARCHITECTURE.md).
///
/// Rules every caller follows: the closure passed to ``withLock(_:)`` never calls user code,
/// never resumes a continuation and never takes another `LockedState`'s lock. It computes an
/// *action* and returns it; the caller performs the action after the lock is released.
///
/// `LockedState` is a reference-semantics struct: copies share the same state and mutex.
@usableFromInline
package struct LockedState<State>: @unchecked Sendable {
    // @unchecked Sendable is sound: `State` is only ever touched inside `withLock`, which holds
    // the mutex stored in the same buffer for the whole access, so every access to the state is
    // serialised, and published to the next holder, by the mutex's acquire/release.

    @usableFromInline
    let storage: LockStorage<State>

    /// Creates the guarded value.
    package static func make(_ initial: State) -> LockedState<State> {
        LockedState(initial)
    }

    /// Creates the guarded value.
    package init(_ initial: State) {
        storage = LockStorage.make(initial)
    }

    /// Runs `body` with exclusive access to the state and returns what it returns.
    @inlinable
    package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try storage.withLock(body)
    }
}

/// The single allocation behind ``LockedState``: the state in the header, the mutex as the element
/// (the element of a `ManagedBuffer` stays at one address for the buffer's life, as a mutex needs).
@usableFromInline
final class LockStorage<State>: ManagedBuffer<State, PlatformMutex.Primitive> {
    static func make(_ initial: State) -> LockStorage<State> {
        let buffer = Self.create(minimumCapacity: 1) { _ in initial }
        buffer.withUnsafeMutablePointerToElements { PlatformMutex.initialize($0) }
        // `create` is a class method returning `ManagedBuffer<State, PlatformMutex.Primitive>`; called on
        // `Self` its dynamic type is `LockStorage<State>`, so the downcast cannot fail.
        return unsafeDowncast(buffer, to: LockStorage<State>.self)
    }

    deinit {
        withUnsafeMutablePointerToElements { mutex in
            PlatformMutex.destroy(mutex)
            mutex.deinitialize(count: 1)
        }
    }

    @inlinable
    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try withUnsafeMutablePointers { state, mutex in
            PlatformMutex.lock(mutex)
            defer { PlatformMutex.unlock(mutex) }
            return try body(&state.pointee)
        }
    }
}
