// The operating system's mutex, behind four functions. This file and Internal/FutureLock.swift are
// the only places in TaskKit that depend on the platform (.ci/check-platform-conditionals).
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Android)
import Android
#endif

/// The platform mutex used by ``LockedState``: `os_unfair_lock` on Apple platforms,
/// `pthread_mutex_t` elsewhere. Both are understood by ThreadSanitizer. Every function takes a
/// pointer to storage that stays at one address for the mutex's whole life (`LockStorage`'s
/// tail element).
@usableFromInline
enum PlatformMutex {
    #if canImport(Darwin)
    @usableFromInline typealias Primitive = os_unfair_lock_s

    @usableFromInline static func initialize(_ mutex: UnsafeMutablePointer<Primitive>) {
        mutex.initialize(to: os_unfair_lock())
    }

    @usableFromInline static func destroy(_ mutex: UnsafeMutablePointer<Primitive>) {}

    @inlinable static func lock(_ mutex: UnsafeMutablePointer<Primitive>) { os_unfair_lock_lock(mutex) }

    @inlinable static func unlock(_ mutex: UnsafeMutablePointer<Primitive>) { os_unfair_lock_unlock(mutex) }
    #else
    @usableFromInline typealias Primitive = pthread_mutex_t

    @usableFromInline static func initialize(_ mutex: UnsafeMutablePointer<Primitive>) {
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        #if DEBUG
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        #endif
        let error = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        precondition(error == 0, "pthread_mutex_init failed with error \(error)")
    }

    @usableFromInline static func destroy(_ mutex: UnsafeMutablePointer<Primitive>) {
        let error = pthread_mutex_destroy(mutex)
        precondition(error == 0, "pthread_mutex_destroy failed with error \(error)")
    }

    @inlinable static func lock(_ mutex: UnsafeMutablePointer<Primitive>) {
        let error = pthread_mutex_lock(mutex)
        precondition(error == 0, "pthread_mutex_lock failed with error \(error)")
    }

    @inlinable static func unlock(_ mutex: UnsafeMutablePointer<Primitive>) {
        let error = pthread_mutex_unlock(mutex)
        precondition(error == 0, "pthread_mutex_unlock failed with error \(error)")
    }
    #endif
}
