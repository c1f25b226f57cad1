#ifndef CTASKKITRUNTIME_H
#define CTASKKITRUNTIME_H

/// The Swift runtime's `swift_tryRetain`: atomically increments the strong reference count of
/// a native Swift object unless the object has started to deinitialise, and returns the object,
/// or NULL if it was deinitialising. This is what Swift's own weak references do when they are
/// read (there through a side table). It is a C entry point of the runtime library (libswiftCore),
/// exported on every platform and part of the stable runtime ABI on Apple platforms.
///
/// TaskKit calls it only on an object whose memory it knows to be allocated: see
/// `CoFuture._upstream` in Sources/TaskKit/Future/CoFuture.swift.
void *_Nullable swift_tryRetain(void *_Nonnull object);

#endif
