/// What ``TaskStore``'s `addTask(forKey:duplicateKeyBehavior:priority:isolation:operation:)` does
/// when a task is already running under the same key.
///
/// A behaviour either *prefers the previous task* (no new work starts; the running task is
/// returned) or *prefers the new task*, in which case two independent choices apply: whether the
/// previous task is cancelled, and whether the new operation waits for the previous task to finish
/// before it starts.
///
/// | behaviour | previous task | new operation starts |
/// |---|---|---|
/// | ``cancelPrevious(wait:)`` with `wait: false` (the default) | cancelled, no longer tracked | immediately |
/// | ``cancelPrevious(wait:)`` with `wait: true` | cancelled | after the previous task finished |
/// | ``wait`` | left running | after the previous task finished |
/// | ``runConcurrently`` | left running, still tracked | immediately |
/// | ``preferPrevious-type.property`` | left running, returned | never (nothing is started) |
///
/// When no task is running under the key, every behaviour simply starts the new task.
public struct TaskStoreDuplicateKeyBehavior: Hashable, Sendable {
    /// The choices that apply when the new task is preferred.
    @usableFromInline
    struct PreferNewOptions: Hashable, Sendable {
        @usableFromInline var cancelPrevious: Bool
        @usableFromInline var waitForPrevious: Bool

        @inlinable
        init(cancelPrevious: Bool, waitForPrevious: Bool) {
            self.cancelPrevious = cancelPrevious
            self.waitForPrevious = waitForPrevious
        }
    }

    /// `nil` means "prefer the previous task".
    @usableFromInline var preferNewOptions: PreferNewOptions?

    @inlinable
    init(preferNewOptions: PreferNewOptions?) {
        self.preferNewOptions = preferNewOptions
    }

    /// Whether a running task under the key is kept and no new work is started.
    public var prefersPrevious: Bool {
        preferNewOptions == nil
    }

    /// Whether a running task under the key is cancelled before the new one is added.
    ///
    /// `false` for ``preferPrevious-type.property``.
    public var cancelsPrevious: Bool {
        preferNewOptions?.cancelPrevious ?? false
    }

    /// Whether the new operation waits for the running task under the key to finish first.
    ///
    /// `true` for ``preferPrevious-type.property`` (which never starts new work, so it never overlaps the
    /// previous task either).
    public var waitsForPrevious: Bool {
        preferNewOptions?.waitForPrevious ?? true
    }

    /// Whether new work is started at all when a task is already running under the key.
    public var runsNewTask: Bool {
        preferNewOptions != nil
    }

    /// Leave the previous task running and start the new operation once it has finished.
    public static var wait: Self {
        Self(preferNewOptions: PreferNewOptions(cancelPrevious: false, waitForPrevious: true))
    }

    /// Cancel the previous task; start the new operation immediately (`wait: false`) or once the
    /// cancelled task has finished (`wait: true`).
    public static func cancelPrevious(wait: Bool) -> Self {
        Self(preferNewOptions: PreferNewOptions(cancelPrevious: true, waitForPrevious: wait))
    }

    /// Leave the previous task running and start the new operation alongside it; the store tracks
    /// both under the key.
    public static var runConcurrently: Self {
        Self(preferNewOptions: PreferNewOptions(cancelPrevious: false, waitForPrevious: false))
    }

    /// Keep the running task, start nothing, and return the running task to the caller.
    public static var preferPrevious: Self {
        Self(preferNewOptions: nil)
    }

    /// Whether the new task is tracked *alongside* the previous ones rather than replacing them.
    @inlinable
    var tracksConcurrently: Bool {
        guard let preferNewOptions else { return false }
        return !preferNewOptions.cancelPrevious && !preferNewOptions.waitForPrevious
    }
}

extension TaskStoreDuplicateKeyBehavior: CustomStringConvertible {
    /// The behaviour spelled as its factory, for example `.cancelPrevious(wait: true)`.
    public var description: String {
        guard let options = preferNewOptions else { return ".preferPrevious" }
        switch (options.cancelPrevious, options.waitForPrevious) {
        case (true, let wait): return ".cancelPrevious(wait: \(wait))"
        case (false, true): return ".wait"
        case (false, false): return ".runConcurrently"
        }
    }
}
