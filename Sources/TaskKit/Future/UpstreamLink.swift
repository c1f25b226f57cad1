internal import CTaskKitRuntime

/// Turns a future's `_upstream` link into a strong reference, or `nil` if the target has
/// started to deinitialise. Called only under the linking future's lock while it is pending,
/// when the target's memory is known to be allocated (the argument is on `CoFuture._upstream`).
/// Not inlinable, so that the runtime declaration stays internal to TaskKit.
/// The result carries the +1 of the retain (`takeRetainedValue()` it), so that nothing is
/// released, and no conformance looked up, under the lock.
@usableFromInline
func _retainUpstream(_ link: Unmanaged<AnyObject>) -> Unmanaged<AnyObject>? {
    guard let retained = swift_tryRetain(link.toOpaque()) else { return nil }
    return Unmanaged.fromOpaque(retained)
}
