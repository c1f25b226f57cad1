/// Where a state machine draws the randomness of its retry delays (``IntervalProxy/Jitter``).
///
/// ``MonoTask`` and ``KeyedMonoTask`` use ``system``; a test gives their state machines a seeded
/// generator, so every delay the machine hands out is known in advance.
@usableFromInline
package struct RetryJitter: RandomNumberGenerator, Sendable {
    private let draw: @Sendable () -> UInt64

    /// The system's random number generator.
    @usableFromInline
    package static let system = RetryJitter(draw: { UInt64.random(in: .min ... .max) })

    /// Draws from `generator`, which this source keeps behind a lock (copies share it).
    package init(_ generator: some RandomNumberGenerator & Sendable) {
        let state = LockedState(generator)
        self.init(draw: { state.withLock { $0.next() } })
    }

    private init(draw: @escaping @Sendable () -> UInt64) {
        self.draw = draw
    }

    @usableFromInline
    package mutating func next() -> UInt64 {
        draw()
    }
}
