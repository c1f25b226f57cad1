/// The bookkeeping of a ``TaskStore``: which tasks run under which key, and what adding, finishing
/// and cancelling mean. A pure value type with no concurrency and no user code, so every rule is
/// unit-testable; the store performs the returned actions.
///
/// `Handle` is the stored task handle (``TaskStoreHandle`` in the store, a plain value in tests).
/// Task identity is a per-store counter, not the handle: a finishing task removes only its own
/// slot, never a newer task that replaced it under the same key.
@usableFromInline
struct TaskStoreStateMachine<Key: Hashable, Handle> {
    /// One tracked task. A labelled tuple: `Sendable` when `Handle` is, and constructible from
    /// inlinable code without an initialiser of its own.
    @usableFromInline typealias Slot = (id: UInt64, handle: Handle)

    /// The tasks tracked under one key: always at least one. More than one only after
    /// ``TaskStoreDuplicateKeyBehavior/runConcurrently`` adds (kept inline so the common single-task
    /// key costs no extra allocation).
    @usableFromInline
    struct Tasks {
        /// The most recently added task.
        @usableFromInline var newest: Slot
        /// Earlier tasks still running concurrently with `newest`.
        @usableFromInline var older: [Slot]

        @inlinable
        init(newest: Slot, older: [Slot] = []) {
            self.newest = newest
            self.older = older
        }

        @inlinable
        var count: Int { older.count + 1 }

        /// Every tracked handle, oldest first.
        @inlinable
        var handles: [Handle] { older.map(\.handle) + [newest.handle] }

        @inlinable
        func forEachHandle(_ body: (Handle) throws -> Void) rethrows {
            for slot in older { try body(slot.handle) }
            try body(newest.handle)
        }

        @inlinable
        func contains(id: UInt64) -> Bool {
            newest.id == id || older.contains { $0.id == id }
        }

        /// Removes the slot with identity `id`, if tracked, unless it is the only one; returns
        /// whether it is the only one (the key stops when it finishes).
        @inlinable
        mutating func removeSlot(id: UInt64) -> Bool {
            if newest.id == id {
                guard let promoted = older.popLast() else { return true }
                newest = promoted
            } else if let position = older.firstIndex(where: { $0.id == id }) {
                older.remove(at: position)
            }
            return false
        }
    }

    /// What `prepareAdd` decided.
    @usableFromInline
    enum AddDecision {
        /// A task is running under the key and the behaviour prefers it: start nothing and hand
        /// the newest running task back to the caller.
        case keepPrevious(Handle)
        /// No task runs under the key: start one with this identity, and the key starts running.
        /// (A case of its own, not `startNew` with an optional `previous`: the common path then
        /// never copies or destroys an `Optional<Tasks>`, which the compiler does through an
        /// unspecialised outlined helper and a value-witness call each time.)
        case startFirst(id: UInt64)
        /// Start a new task with this identity while `previous` run under the key; the store
        /// cancels them first if `cancelPrevious`, and the new operation waits for them if
        /// `waitForPrevious`.
        case startNew(id: UInt64, previous: Tasks, cancelPrevious: Bool, waitForPrevious: Bool)
    }

    /// What `finish` decided.
    @usableFromInline
    enum FinishAction: Equatable {
        /// The task was no longer tracked (it had been replaced), or other tasks keep the key
        /// running; its slot, if any, has been removed.
        case none
        /// The task was the last one under its key. The entry is still present: the store calls
        /// `removeFinished` inside its observation mutation so observers see the change.
        case stopKey
    }

    @usableFromInline var entries: [Key: Tasks] = [:]
    @usableFromInline var lastID: UInt64 = 0

    @inlinable
    init() {}

    /// Decides what adding a task under `key` with `behavior` does, and reserves an identity when
    /// new work starts. The caller must then create the task and call `commitAdd` with the same
    /// key, identity and behaviour before anything else touches the machine.
    @inlinable
    mutating func prepareAdd(key: Key, behavior: TaskStoreDuplicateKeyBehavior) -> AddDecision {
        guard let index = entries.index(forKey: key) else {
            lastID &+= 1
            return .startFirst(id: lastID)
        }
        let previous = entries.values[index]
        guard let options = behavior.preferNewOptions else {
            return .keepPrevious(previous.newest.handle)
        }
        lastID &+= 1
        return .startNew(
            id: lastID,
            previous: previous,
            cancelPrevious: options.cancelPrevious,
            waitForPrevious: options.waitForPrevious
        )
    }

    /// Records the task created for a `.startFirst` decision: the key starts running.
    ///
    /// If anything was added since `prepareAdd` handed out `id` (an observer's `willSet` handler,
    /// which runs just before the store commits, re-entered the store: `lastID` moved on), the
    /// key may already have an entry, and both tasks stay tracked, as with `.runConcurrently`,
    /// rather than one being lost.
    @inlinable
    mutating func commitFirst(key: Key, id: UInt64, handle: Handle) {
        guard lastID == id else {
            commitAdd(key: key, id: id, handle: handle, behavior: .runConcurrently)
            return
        }
        entries[key] = Tasks(newest: Slot(id: id, handle: handle))
    }

    /// Records the task created for a `.startNew` decision (the key keeps running).
    @inlinable
    mutating func commitAdd(key: Key, id: UInt64, handle: Handle, behavior: TaskStoreDuplicateKeyBehavior) {
        let slot = Slot(id: id, handle: handle)
        guard let index = entries.index(forKey: key) else {
            // A `.startNew` commit always finds its key (only the `Task` is created between
            // `prepareAdd` and this call); `commitFirst` lands here when a re-entrant add moved
            // `lastID` on under another key. Either way the task is recorded, not lost.
            entries[key] = Tasks(newest: slot)
            return
        }
        if behavior.tracksConcurrently || lastID != id {
            // (`lastID != id`: a task was added under the key since `prepareAdd`, by an
            // immediate task's operation re-entering the store before its first suspension;
            // both stay tracked rather than one being lost.)
            // Mutated in place through `values` so the `older` array is not copied.
            entries.values[index].older.append(entries.values[index].newest)
            entries.values[index].newest = slot
        } else {
            // The new task replaces every task tracked under the key (they were cancelled or are
            // awaited by it, and their own `finish` will not find them).
            entries.values[index] = Tasks(newest: slot)
        }
    }

    /// A task finished. Removes its slot if it is still tracked, unless it is the last task of its
    /// key: then it reports `.stopKey` and leaves the entry as it is, so the store can remove it
    /// with `removeFinished` inside its observation mutation (observers are told before the
    /// change).
    @inlinable
    mutating func finish(key: Key, id: UInt64) -> FinishAction {
        guard let index = entries.index(forKey: key) else { return .none }
        // A mutating call through `values` works on the entry in place; reading
        // `entries.values[index].newest.id` would copy the entry out (retaining and releasing it).
        return entries.values[index].removeSlot(id: id) ? .stopKey : .none
    }

    /// A task finished: removes its slot if it is still tracked and, if no other task is tracked
    /// under `key`, the key's entry, returning the key the entry held. (The store calls it on its
    /// own when nobody observes it, or after `finish` reported `.stopKey`; in between an observer
    /// may have added a task under the key, which then stays.)
    ///
    /// The caller destroys the returned key after its table access: it can be the last copy of a
    /// key instance (the dictionary keeps the first of equal keys), and destroying that runs the
    /// key's `deinit`, which is user code. (The entry's tasks are destroyed here: each is still
    /// running, so releasing it never frees it.)
    @inlinable
    mutating func removeFinished(key: Key, id: UInt64) -> Key? {
        guard let index = entries.index(forKey: key) else { return nil }
        guard entries.values[index].removeSlot(id: id) else { return nil }
        return entries.remove(at: index).key
    }

    /// The tasks tracked under `key`, to cancel them.
    @inlinable
    func tasks(forKey key: Key) -> Tasks? {
        entries[key]
    }

    /// The number of tracked tasks under all keys.
    @inlinable
    var taskCount: Int {
        entries.values.reduce(0) { $0 + $1.count }
    }

    /// Whether any task is tracked under `key`.
    @inlinable
    func isRunning(_ key: Key) -> Bool {
        entries.index(forKey: key) != nil
    }
}

extension TaskStoreStateMachine.Tasks: Sendable where Handle: Sendable {}
