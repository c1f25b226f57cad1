/// Refresh ahead: a hit on a value near the end of its life returns it at once and starts one
/// background reload, so that callers of a busy key never wait for its expiry.
///
/// A value is *due* for a refresh once it is older than ``fraction(_:)`` of its own lifetime (its
/// time to live after `expiry` and `expiryJitter`), or older than ``age(_:)``. The first hit on a
/// due value starts the reload (counted as `refreshesAhead`); the hits that follow keep getting
/// the value until the reload stores the new one. A failed refresh leaves the value as it was,
/// to expire at its time (the next hit may try again). A value never hit in its last part of
/// life is not reloaded: refresh ahead costs loads only for the keys in use.
///
/// With `expiryJitter`, a fraction is taken of each value's jittered lifetime, so the refresh
/// points of values loaded together are spread as their expiries are; an ``age(_:)`` is the same
/// for every value.
///
/// ```swift
/// let profiles = KeyedMonoTask<Int, Profile>(
///     maximumEntries: 10_000,
///     resultExpireDuration: .seconds(300),
///     refreshAhead: .fraction(0.8)   // the last minute of five: serve, reload in the background
/// ) { id in
///     try await directory.profile(id)
/// }
/// ```
public struct RefreshAhead: Sendable, Hashable, CustomStringConvertible {
    @usableFromInline
    enum Point: Sendable, Hashable {
        case fraction(Double)
        case age(Duration)
    }

    @usableFromInline let point: Point

    @usableFromInline
    init(point: Point) { self.point = point }

    /// A value is due once `fraction` of its lifetime has passed.
    ///
    /// - Precondition: `0 < fraction < 1` (the message names the parameter).
    public static func fraction(_ fraction: Double) -> RefreshAhead {
        precondition(fraction > 0 && fraction < 1, "RefreshAhead: fraction must be > 0 and < 1, got \(fraction)")
        return RefreshAhead(point: .fraction(fraction))
    }

    /// A value is due once it is `age` old (a value whose lifetime is shorter expires first and is
    /// never refreshed ahead).
    ///
    /// - Precondition: `age > .zero` (the message names the parameter).
    public static func age(_ age: Duration) -> RefreshAhead {
        precondition(age > .zero, "RefreshAhead: age must be > .zero, got \(age)")
        return RefreshAhead(point: .age(age))
    }

    /// How far into a value's `lifetime` (`nil`: kept until cleared) it is due, or `nil` when it
    /// expires first (or, for a fraction, never expires).
    func due(within lifetime: Duration?) -> Duration? {
        switch point {
        case .fraction(let fraction):
            guard let lifetime else { return nil }
            let due = lifetime * fraction
            return due < lifetime ? due : nil
        case .age(let age):
            guard let lifetime else { return age }
            return age < lifetime ? age : nil
        }
    }

    public var description: String {
        switch point {
        case .fraction(let fraction): "RefreshAhead.fraction(\(fraction))"
        case .age(let age): "RefreshAhead.age(\(age))"
        }
    }
}
