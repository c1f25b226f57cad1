internal import CTaskKitRuntime

/// Turns a future's `_upstream` link into a strong reference, or `nil` if the target has
/// started to deinitialise. Called only under the linking future's lock while it is pending,
/// when the target's memory is known to be allocated (the argument is on `CoFuture._upstream`).
/// Not inlinable, so that the runtime declaration stays internal to TaskKit.
@usableFromInline
func _retainUpstream(_ link: Unmanaged<AnyObject>) -> (any _CoFutureNode)? {
    guard let retained = swift_tryRetain(link.toOpaque()) else { return nil }
    let target = Unmanaged<AnyObject>.fromOpaque(retained).takeRetainedValue()
    assert(target is any _CoFutureNode, "an upstream link always points to a CoFuture")
    return target as? any _CoFutureNode
}
