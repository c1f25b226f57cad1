/// Where a ``CoFuture`` keeps its result: an implementation detail that has to be `public`
/// because `CoFuture` inherits from it. It has no public members and cannot be subclassed or
/// created outside TaskKit; use ``CoFuture`` and ``CoPromise``.
///
/// Why a superclass at all: a class's `deinit` runs TaskKit's *unspecialised* code, which must
/// find the type metadata of every generic field it destroys. For a field whose type is built
/// from `Value` inside `CoFuture<Value>`, that is a run-time lookup in the runtime's metadata
/// cache: about 330 instructions per future for the non-optional `Result` (with a placeholder
/// error while pending) that the result used to be, twice that for a `Result?`. A field whose
/// type is a generic parameter *of its own class* is destroyed with metadata read straight from
/// the object's class metadata, where it was stored once when `CoFuture<Value>`'s metadata was
/// created. So `CoFuture<Value>` inherits from `_CoFutureStorage<Value?>` and its success value
/// lives here (its error, of a non-generic type, in `CoFuture._error`), with no placeholder to
/// retain while pending. (Seed workload: 9,747 to 8,248 instructions per iteration with a
/// `Result?` here; 7,068 to 6,872 more once split into `Value?` plus the error, whose destroy
/// skips the runtime's multi-payload enum code. A probe with a `Result?` field: 1,204 vs 543
/// instructions to create, set and free one object.)
@_documentation(visibility: internal)
public class _CoFutureStorage<Stored: Sendable>: @unchecked Sendable {
    // @unchecked Sendable is sound: `_value` is accessed only by CoFuture, under the rules
    // stated on CoFuture (written under its lock; read under it or after an acquiring load of
    // its completed bit).

    /// The future's success value, `nil` unless it succeeded. See ``CoFuture`` for the access
    /// rules. `@exclusivity(unchecked)` for the reason given on CoFuture's fields.
    @usableFromInline @exclusivity(unchecked)
    final var _value: Stored

    @inlinable
    init(_storing value: Stored) {
        _value = value
    }
}
