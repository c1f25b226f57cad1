import Logging
import Observation
import Synchronization

/// Runs asynchronous work under keys: at most one *current* task per key (or several, if you ask
/// for it), cancellation by key, an observable "is running" per key, and a policy for what happens
/// when work is added under a key that is already running.
///
/// ```swift
/// @MainActor @Observable final class SearchModel {
///     enum TaskKey: Hashable { case search }
///     private let tasks = TaskStore<TaskKey>()
///     var isSearching: Bool { tasks.taskIsRunning(forKey: .search) }
///
///     func queryChanged(_ query: String) {
///         // The default behaviour cancels the previous search and starts this one at once.
///         tasks.addTask(forKey: .search) { await self.search(query) }
///     }
/// }
/// ```
///
/// ## Isolation
///
/// A `TaskStore` is not `Sendable`. It belongs to the actor it is used from (the main actor in a
/// SwiftUI model, or your own actor): every method that changes it takes an
/// `isolation: isolated (any Actor)? = #isolation` parameter, so it runs on the caller's actor
/// without a hop, and the tasks it creates start on that same actor, run their operation there
/// (the operation is `nonisolated(nonsending)`, so it leaves only for code isolated elsewhere)
/// and do their bookkeeping there. The store is therefore only ever touched from one serial
/// executor and needs no lock.
///
/// ### From a nonisolated context
///
/// A store created and used from nonisolated code (a nonisolated `async` function, a test, a
/// nonisolated synchronous helper called from an actor) works too: its `isolation` is `nil`.
/// The compiler keeps such a store in one task's region, so the caller's own calls never overlap;
/// the tasks it starts are nonisolated, run on the global executor, and report their end through
/// a small locked list that the store applies at its next use (and they notify observers when
/// they post to it). Two differences follow: a task's end becomes visible at the store's next
/// call, not on an actor; and a cancel issued right after `addTask` reaches the operation at its
/// next check but may come after it has started, as for any `Task { }` created there. A nil
/// call on a store that an actor already owns is accepted when it runs on that actor's executor
/// (a nonisolated synchronous helper called from the actor).
///
/// ### What still traps
///
/// Only uses that the compiler rejects unless you opt out of its checks (`nonisolated(unsafe)`,
/// an `@unchecked Sendable` box) can reach the store from the wrong place, and the store traps
/// rather than race: the first call with an actor binds the store to that actor, and a later
/// changing call from a *different* actor traps (the binding uses an atomic compare-and-exchange);
/// reads, and nil-isolation calls, made off the owning actor's executor once it is bound trap
/// through `Actor.preconditionIsolated`. Reads (`taskIsRunning(forKey:)`, `runningKeys`,
/// `runningTaskCount`, `currentTask(forKey:)`) have no isolation parameter, so SwiftUI views and
/// synchronous getters can use them.
///
/// ## Lifetime
///
/// Every task the store starts keeps the store alive until the task finishes. Releasing the store
/// does not cancel anything; call ``cancelAllTasks(isolation:)`` first if that is what you want.
@Observable
public final class TaskStore<Key: Hashable & Sendable> {
    @usableFromInline typealias Machine = TaskStoreStateMachine<Key, TaskStoreHandle>

    /// The table of running tasks. Every access goes through ``withMachine(_:)``, which traps on a
    /// nested access instead of letting it corrupt the table. `@exclusivity(unchecked)`: Swift's
    /// dynamic exclusivity check would do the same, at ~140 instructions per access (a thread-local
    /// access set; three accesses per `addTask` round trip, 15% of the store's overhead), and
    /// `withMachine`'s flag makes it redundant: all accesses happen on the owning actor, one at a
    /// time unless user code runs inside one, and the only user code that can (a `Key`'s
    /// `hash(into:)` or `==`) finds the flag set and traps before touching the table. No other
    /// user code runs inside: an access never destroys a key (a removed key is handed out and
    /// destroyed after the access, see `removeFinished`), nor the last reference to a task (the
    /// table holds only tasks whose body has not finished, and a running task keeps itself), and
    /// cancellation, logging and observation calls all happen outside.
    @ObservationIgnored @usableFromInline @exclusivity(unchecked) var machine = Machine()
    /// Whether ``withMachine(_:)`` is running; see `machine`. Same isolation argument as
    /// `isObserved`.
    @ObservationIgnored @usableFromInline @exclusivity(unchecked) var machineInUse = false
    @ObservationIgnored @usableFromInline let logger: Logger
    /// The actor this store belongs to, as an `ObjectIdentifier` bit pattern; 0 while unbound.
    @ObservationIgnored @usableFromInline let ownerID = Atomic<UInt>(0)
    /// The actor this store belongs to, for the read-side executor check and trap messages.
    /// Unowned, not strong: a custom actor usually owns its store, and a strong reference would
    /// make a cycle. Not weak either: a weak reference gives the actor a side table, which sends
    /// every retain and release of the actor (each task enqueued on it) down the runtime's slow
    /// path — measured at 12% of `addTask`'s CPU time. The store cannot outlive its actor in a
    /// way that reaches this reference: it is not `Sendable`, so it stays in the actor's region,
    /// and every task it starts retains the actor until it finishes.
    @ObservationIgnored private unowned var ownerActor: (any Actor)?
    /// `\.runningKeys`, created once. The observation calls run as unspecialised generic code
    /// (`observeRunningKeys`, `notifyingMutation`), where a key-path literal is instantiated at run
    /// time on every evaluation (an allocation and a metadata lookup); measured at ~2.5 µs per
    /// `taskIsRunning(forKey:)` before this cache.
    @ObservationIgnored @usableFromInline let runningKeysPath: KeyPath<TaskStore<Key>, Set<Key>> = \.runningKeys
    /// Whether ``runningKeys`` or ``taskIsRunning(forKey:)`` has ever been read. Until then no
    /// observer can have registered interest in the store (those reads are the only places that
    /// call `access(keyPath:)`), so starting and stopping a key skip the registrar's `willSet` and
    /// `didSet` (two lock round trips and a key-path lookup each). Set once, never cleared: after
    /// the first read every change notifies, as `@Observable` properties always do. Touched only
    /// on the owning actor, like `machine`. `@exclusivity(unchecked)`: every access is a single
    /// load or store of a `Bool` that runs no other code, so no two accesses can overlap, and all
    /// of them happen on the owning actor.
    @ObservationIgnored @usableFromInline @exclusivity(unchecked) var isObserved = false
    /// Ends reported by tasks that do not run on the owning actor (those started by a call with
    /// `nil` isolation, and immediate tasks): each posts its key and identity here, and the
    /// owner applies them at its next call (`drainFinishedElsewhere`). Guarded by its lock; the
    /// lock is held only to append or to take the array, never while user code runs.
    @ObservationIgnored @usableFromInline let finishedElsewhere = LockedState<[(key: Key, id: UInt64)]>([])
    /// Whether any task may post to `finishedElsewhere`, so calls must drain it first. Set and
    /// read only on the caller's side (the owning actor, or the one nonisolated region), never by
    /// a task; `@exclusivity(unchecked)` for the same reason as `isObserved`.
    @ObservationIgnored @usableFromInline @exclusivity(unchecked) var usesInbox = false
    /// Immediate tasks created but not yet recorded: an end they post before their commit waits
    /// in `finishedElsewhere` until the commit (caller side only, like `usesInbox`).
    @ObservationIgnored var uncommittedImmediate: Set<UInt64> = []

    /// Creates an empty store.
    ///
    /// - Parameter logger: Receives `trace` messages for cancellations and for work skipped by
    ///   ``TaskStoreDuplicateKeyBehavior/preferPrevious-type.property``. Silent by default.
    public init(logger: Logger = .silent(label: "TaskKit.TaskStore")) {
        self.logger = logger
    }

    // MARK: - Adding work

    /// Starts `operation` under `key`, applying `duplicateKeyBehavior` if a task is already running
    /// under that key, and returns the task that represents the work.
    ///
    /// - The new task is tracked under `key` until it finishes; ``taskIsRunning(forKey:)`` is `true`
    ///   meanwhile. When it finishes it removes itself, but only if it is still tracked: a task that
    ///   was replaced never makes the newer task look idle.
    /// - For the waiting behaviours (``TaskStoreDuplicateKeyBehavior/wait`` and
    ///   `.cancelPrevious(wait: true)`), cancelling the returned task also cancels the task(s) it
    ///   waits for.
    /// - Cancellation issued right after this call (on the returned task, or through
    ///   ``cancelTask(forKey:isolation:)``) always reaches `operation`: it sees `Task.isCancelled`
    ///   at its first check. The operation always runs once the task starts; it is up to the
    ///   operation to stop early when cancelled.
    /// - `operation` is `nonisolated(nonsending)`: it runs on the store's actor, like the body of
    ///   a `Task { … }` written in the same place, and leaves it only for code isolated elsewhere.
    ///   A closure such as `{ await self.search(query) }` in a `@MainActor` model therefore never
    ///   hops; its synchronous stretches take turns on the actor (also under
    ///   ``TaskStoreDuplicateKeyBehavior/runConcurrently``, where tasks interleave at their
    ///   suspension points). For CPU-heavy work that must not block the actor, call a
    ///   `@concurrent` function from the operation. A function *value* passed as the operation
    ///   keeps its own isolation: a `@Sendable () async -> Void` value or a nonisolated `async`
    ///   function is `@concurrent` unless the module enables `NonisolatedNonsendingByDefault`, so
    ///   it runs off the actor (and the task hops back to finish).
    /// - With ``TaskStoreDuplicateKeyBehavior/preferPrevious-type.property`` and a running task, nothing starts
    ///   and the newest running task under the key is returned. If that task was started by the
    ///   value-returning overload, the returned `Task<Void, Never>` is a small wrapper that waits
    ///   for it and forwards cancellation to it.
    ///
    /// - Parameters:
    ///   - key: The key the work runs under.
    ///   - duplicateKeyBehavior: What to do if a task is already running under `key`. Defaults to
    ///     cancelling it and starting the new work at once.
    ///   - priority: The priority of the new task, as for `Task.init`.
    ///   - isolation: The actor the store belongs to. Leave the default (`#isolation`); `nil`
    ///     (a nonisolated caller) works as the type's *Isolation* section describes, and an
    ///     actor other than the store's traps.
    ///   - operation: The work.
    /// - Returns: The task running `operation`, or the kept task for `.preferPrevious`. You do not
    ///   need to keep it: the store tracks it.
    @inlinable
    @discardableResult
    public func addTask(
        forKey key: Key,
        duplicateKeyBehavior: TaskStoreDuplicateKeyBehavior = .cancelPrevious(wait: false),
        priority: TaskPriority? = nil,
        isolation: isolated (any Actor)? = #isolation,
        operation: nonisolated(nonsending) @escaping @Sendable () async -> Void
    ) -> Task<Void, Never> {
        checkOwner(isolation, in: "addTask(forKey:duplicateKeyBehavior:priority:isolation:operation:)")
        return add(
            forKey: key, duplicateKeyBehavior: duplicateKeyBehavior, immediate: false,
            keep: { Self.voidTask(waitingFor: $0, priority: priority) }
        ) { id, awaited in
            // The body is isolated to the store's actor (it captures `isolation`), so it cannot start
            // before the caller's current actor job ends: a cancel issued right after `addTask`
            // (`cancelTask`, or `cancel()` on the returned task) always precedes `operation`.
            // `operation` is `nonisolated(nonsending)`, so it runs right here without a hop unless
            // it is isolated elsewhere itself.
            let task = Task(priority: priority) {
                _ = isolation
                if let awaited { await Self.waitFor(awaited) }
                await operation()
                self.taskFinished(key: key, id: id, detached: isolation == nil)
            }
            return (task, .plain(task))
        }
    }

    /// Starts a value-returning, throwing `operation` under `key`, applying `duplicateKeyBehavior`
    /// if a task is already running under that key, and returns the task that represents the work.
    ///
    /// Everything said for the `Void` overload applies. In addition:
    /// - If the operation throws, the task ends with that error; the store removes it as usual.
    /// - With ``TaskStoreDuplicateKeyBehavior/preferPrevious-type.property`` and a running task, the running task
    ///   is returned if it has exactly this type, `Task<Success, any Error>`. If `Success` is `Void`,
    ///   any running task is: as a small task that waits for it and forwards cancellation to it
    ///   (so adding `try` to a `Void` operation, which selects this overload, changes nothing).
    ///   Otherwise (it was started with another `Success`, or by the `Void` overload) there is no
    ///   value to return: nothing starts, and the returned task fails at once with
    ///   ``TaskStoreResultTypeMismatch``, naming the key and both types.
    ///
    /// - Parameters:
    ///   - key: The key the work runs under.
    ///   - duplicateKeyBehavior: What to do if a task is already running under `key`.
    ///   - priority: The priority of the new task.
    ///   - isolation: The actor the store belongs to (leave the default).
    ///   - operation: The work; its result or error becomes the task's.
    /// - Returns: The task running `operation`, or the kept task for `.preferPrevious`.
    @inlinable
    @discardableResult
    public func addTask<Success: Sendable>(
        forKey key: Key,
        duplicateKeyBehavior: TaskStoreDuplicateKeyBehavior = .cancelPrevious(wait: false),
        priority: TaskPriority? = nil,
        isolation: isolated (any Actor)? = #isolation,
        operation: nonisolated(nonsending) @escaping @Sendable () async throws -> Success
    ) -> Task<Success, any Error> {
        checkOwner(isolation, in: "addTask(forKey:duplicateKeyBehavior:priority:isolation:operation:)")
        return add(
            forKey: key, duplicateKeyBehavior: duplicateKeyBehavior, immediate: false,
            keep: { Self.typedTask(keeping: $0, key: key, priority: priority) }
        ) { id, awaited in
            // Isolated to the store's actor, as in the `Void` overload, so a cancel right after
            // `addTask` always precedes `operation`.
            let task = Task(priority: priority) { () async throws -> Success in
                _ = isolation
                defer { self.taskFinished(key: key, id: id, detached: isolation == nil) }
                if let awaited { await Self.waitFor(awaited) }
                return try await operation()
            }
            return (task, .typed(TypedTaskBox(task)))
        }
    }

    // MARK: - Cancelling

    /// Cancels every task tracked under `key` (several after
    /// ``TaskStoreDuplicateKeyBehavior/runConcurrently`` adds).
    ///
    /// Cancellation is cooperative: the tasks stay tracked, and ``taskIsRunning(forKey:)`` stays
    /// `true`, until they actually finish. Tasks that a waiting behaviour chained behind are
    /// cancelled through the chain. Does nothing if no task runs under `key`.
    ///
    /// - Parameters:
    ///   - key: The key whose tasks are cancelled.
    ///   - isolation: The actor the store belongs to (leave the default).
    @inlinable
    public func cancelTask(forKey key: Key, isolation: isolated (any Actor)? = #isolation) {
        checkOwner(isolation, in: "cancelTask(forKey:isolation:)")
        guard let tasks = withMachine({ $0.tasks(forKey: key) }) else { return }
        logger.trace("cancelTask", metadata: ["key": "\(key)", "tasks": "\(tasks.count)"])
        tasks.forEachHandle { $0.cancel() }
    }

    /// Cancels every task the store tracks, under every key.
    ///
    /// As with ``cancelTask(forKey:isolation:)``, the keys keep running until their tasks finish.
    ///
    /// - Parameter isolation: The actor the store belongs to (leave the default).
    public func cancelAllTasks(isolation: isolated (any Actor)? = #isolation) {
        checkOwner(isolation, in: "cancelAllTasks(isolation:)")
        let entries = withMachine { $0.entries }
        logger.trace("cancelAllTasks", metadata: ["keys": "\(entries.count)"])
        for tasks in entries.values {
            tasks.forEachHandle { $0.cancel() }
        }
    }

    // MARK: - Reading

    /// Whether a task is running under `key`.
    ///
    /// Observable: reading it inside `withObservationTracking` (or a SwiftUI `body`) registers
    /// interest in the store's set of running keys, and the observer is notified when any key
    /// starts or stops running. Replacing a running task under a key is not a change.
    ///
    /// Traps if called off the actor the store belongs to.
    @inlinable
    public func taskIsRunning(forKey key: Key) -> Bool {
        checkRead("taskIsRunning(forKey:)")
        observeRunningKeys()
        return withMachine { $0.isRunning(key) }
    }

    /// The keys that have at least one running task. Observable like ``taskIsRunning(forKey:)``.
    ///
    /// Built on each read (linear in the number of running keys).
    /// Traps if read off the actor the store belongs to.
    @inlinable
    public var runningKeys: Set<Key> {
        checkRead("runningKeys")
        observeRunningKeys()
        return withMachine { Set($0.entries.keys) }
    }

    /// The number of running tasks, under all keys: two tasks running concurrently under one key
    /// (``TaskStoreDuplicateKeyBehavior/runConcurrently``) count two, and a task replaced under a
    /// running key counts until it finishes only if the store still tracks it (the waiting
    /// behaviours track the new task alone).
    ///
    /// Observable as far as ``runningKeys`` is: observers are told when a key starts or stops,
    /// not when a task is added beside a running one. Linear in the number of running keys.
    /// Traps if read off the actor the store belongs to.
    public var runningTaskCount: Int {
        checkRead("runningTaskCount")
        observeRunningKeys()
        return withMachine { $0.taskCount }
    }

    /// The newest task running under `key`, to await or cancel it; `nil` if none runs.
    ///
    /// A task started by the value-returning `addTask` is handed out as a `Task<Void, Never>` that
    /// waits for it and forwards cancellation to it (use ``currentTask(forKey:returning:)`` for
    /// its value). Not observable. Traps if called off the actor the store belongs to.
    ///
    /// ```swift
    /// if let running = store.currentTask(forKey: .refresh) { await running.value }
    /// ```
    public func currentTask(forKey key: Key) -> Task<Void, Never>? {
        checkRead("currentTask(forKey:)")
        guard let newest = withMachine({ $0.tasks(forKey: key)?.newest.handle }) else { return nil }
        return Self.voidTask(waitingFor: newest)
    }

    /// The newest task running under `key` if it was started by the value-returning `addTask`
    /// with this `Success` type; `nil` if none runs or it has another result type.
    ///
    /// Traps if called off the actor the store belongs to.
    public func currentTask<Success: Sendable>(
        forKey key: Key, returning type: Success.Type
    ) -> Task<Success, any Error>? {
        checkRead("currentTask(forKey:returning:)")
        guard case .typed(let box)? = withMachine({ $0.tasks(forKey: key)?.newest.handle }) else { return nil }
        return (box as? TypedTaskBox<Success>)?.task
    }

    // MARK: - Internals

    /// What every `add…Task` does around the task it starts: applies `duplicateKeyBehavior`
    /// (`keep` answers for `.preferPrevious`), then lets `start` create the task with its id and
    /// the tasks it must wait for, records it, and cancels the previous tasks if the behaviour
    /// says so, after the commit (their cancellation handlers may re-enter the store; they then
    /// find the new task recorded). An `immediate` task (`Task.immediate`) may finish inside
    /// `start`: its end is held back until it is committed, then applied.
    @inlinable
    func add<Started>(
        forKey key: Key,
        duplicateKeyBehavior: TaskStoreDuplicateKeyBehavior,
        immediate: Bool,
        keep: (TaskStoreHandle) -> Started,
        start: (_ id: UInt64, _ awaited: Machine.Tasks?) -> (Started, TaskStoreHandle)
    ) -> Started {
        switch withMachine({ $0.prepareAdd(key: key, behavior: duplicateKeyBehavior) }) {
        case .keepPrevious(let previous):
            logger.trace("addTask: kept the running task (preferPrevious)", metadata: ["key": "\(key)"])
            return keep(previous)
        case .startFirst(let id):
            if immediate { immediateStarts(id) }
            let (task, handle) = start(id, nil)
            commitFirst(key: key, id: id, handle: handle)
            if immediate { immediateCommitted(id) }
            return task
        case .startNew(let id, let previous, let cancelPrevious, let waitForPrevious):
            if immediate { immediateStarts(id) }
            let (task, handle) = start(id, waitForPrevious ? previous : nil)
            withMachine { $0.commitAdd(key: key, id: id, handle: handle, behavior: duplicateKeyBehavior) }
            if cancelPrevious { previous.forEachHandle { $0.cancel() } }
            if immediate { immediateCommitted(id) }
            return task
        }
    }

    /// An immediate task is about to start: its end, if it comes before the commit, waits.
    @usableFromInline
    func immediateStarts(_ id: UInt64) {
        uncommittedImmediate.insert(id)
    }

    /// An immediate task is committed: an end it posted meanwhile is applied now.
    @usableFromInline
    func immediateCommitted(_ id: UInt64) {
        uncommittedImmediate.remove(id)
        drainFinishedElsewhere()
    }

    /// `handle` as a `Task<Void, Never>`: itself for the `Void` overload's tasks, otherwise a
    /// small task that waits for it and forwards cancellation to it.
    @usableFromInline
    static func voidTask(waitingFor handle: TaskStoreHandle, priority: TaskPriority? = nil) -> Task<Void, Never> {
        if case .plain(let task) = handle { return task }
        return Task(priority: priority) {
            await withTaskCancellationHandler {
                await handle.waitForCompletion()
            } onCancel: {
                handle.cancel()
            }
        }
    }

    /// The task the value-returning `addTask` returns under `.preferPrevious` for the running
    /// `handle`: itself if it has this type; for `Void`, a small task that waits for it and
    /// forwards cancellation to it; otherwise a task that fails with
    /// ``TaskStoreResultTypeMismatch``.
    @usableFromInline
    static func typedTask<Success: Sendable>(
        keeping handle: TaskStoreHandle, key: Key, priority: TaskPriority?
    ) -> Task<Success, any Error> {
        if case .typed(let box) = handle, let task = (box as? TypedTaskBox<Success>)?.task { return task }
        if Success.self == Void.self {
            let waiting = Task<Void, any Error>(priority: priority) {
                await withTaskCancellationHandler {
                    await handle.waitForCompletion()
                } onCancel: {
                    handle.cancel()
                }
            }
            if let waiting = waiting as? Task<Success, any Error> { return waiting }
        }
        let mismatch = TaskStoreResultTypeMismatch(
            key: String(describing: key), runningTaskType: String(describing: handle.taskType),
            requestedTaskType: String(describing: Task<Success, any Error>.self)
        )
        return Task(priority: priority) { throw mismatch }
    }

    /// A task that does not run on the owning actor ended: record it for the owner's next call,
    /// telling observers around the change (they re-read, which applies it).
    @usableFromInline
    func reportFinishedElsewhere(key: Key, id: UInt64) {
        notifyingMutation { finishedElsewhere.withLock { $0.append((key, id)) } }
    }

    /// Applies the ends posted to `finishedElsewhere` as the owner's own finishes, except those of
    /// immediate tasks not yet committed (they stay for the drain after their commit). Caller
    /// side only.
    @usableFromInline
    func drainFinishedElsewhere() {
        let finished = finishedElsewhere.withLock { pending -> [(key: Key, id: UInt64)] in
            let taken = pending
            pending = []
            return taken
        }
        guard !finished.isEmpty else { return }
        var early: [(key: Key, id: UInt64)] = []
        for (key, id) in finished {
            if uncommittedImmediate.contains(id) {
                early.append((key, id))
                continue
            }
            // The owner's own finish: observers are told again if the key stops here (one may
            // have started observing after the task posted).
            taskFinished(key: key, id: id, detached: false)
        }
        if !early.isEmpty {
            finishedElsewhere.withLock { $0.append(contentsOf: early) }
        }
    }

    /// A changing call with `nil` isolation: accepted on an unbound store, or on the owning
    /// actor's executor; its tasks report through `finishedElsewhere`.
    @usableFromInline
    func nonisolatedCall(in function: StaticString) {
        if ownerID.load(ordering: .acquiring) != 0, let owner = ownerActor {
            owner.preconditionIsolated(
                "TaskStore.\(function) called with nil isolation off the executor of the actor that owns the store (\(owner))"
            )
        }
        usesInbox = true
        drainFinishedElsewhere()
    }
    //
    // The hot paths (`addTask`, the task body and its `taskFinished`, `taskIsRunning`) and the
    // state machine are `@inlinable`, so they are specialised for the client's `Key` in the
    // client's module: unspecialised, every dictionary and enum operation on `Key`-dependent types
    // looks up generic metadata at run time (figures in Benchmarks/NOTES.md).

    /// Registers an observation access to ``runningKeys`` (the macro's `access` is internal, so
    /// inlinable code calls it through this).
    @usableFromInline
    func observeRunningKeys() {
        isObserved = true
        access(keyPath: runningKeysPath)
    }

    /// Records the first task of a key that was not running: the key starts running, observably
    /// once anything has read the store.
    @inlinable
    func commitFirst(key: Key, id: UInt64, handle: TaskStoreHandle) {
        if isObserved {
            notifyingMutation { withMachine { $0.commitFirst(key: key, id: id, handle: handle) } }
        } else {
            withMachine { $0.commitFirst(key: key, id: id, handle: handle) }
        }
    }

    /// Runs `body` on `machine`, trapping if another access is in progress: the only way one can
    /// be is user code running inside an access (a `Key`'s `hash(into:)` or `==` that uses the
    /// store), which would otherwise read or change the table while it is being changed.
    @inlinable
    @inline(__always)
    func withMachine<Result>(_ body: (inout Machine) -> Result) -> Result {
        if _slowPath(machineInUse) { machineReentered() }
        machineInUse = true
        defer { machineInUse = false }
        return body(&machine)
    }

    @usableFromInline
    func machineReentered() -> Never {
        preconditionFailure(
            "TaskStore: the store was used while it was looking up or storing a key, from inside the key's "
                + "hash(into:) or ==. A key's Hashable conformance must not use the store it is a key of"
        )
    }

    /// `body` inside the registrar's `willSet`/`didSet` for ``runningKeys`` (the macro's
    /// `withMutation` is internal, so inlinable code calls it through this).
    @usableFromInline
    func notifyingMutation(_ body: () -> Void) {
        withMutation(keyPath: runningKeysPath, body)
    }

    @inlinable
    static func waitFor(_ previous: Machine.Tasks) async {
        // Cancelling the new task cancels what it waits for (immediately if it already is).
        await withTaskCancellationHandler {
            for slot in previous.older { await slot.handle.waitForCompletion() }
            await previous.newest.handle.waitForCompletion()
        } onCancel: {
            previous.forEachHandle { $0.cancel() }
        }
    }

    /// Runs when a task the store started finishes: on the store's actor, or, for a task started
    /// with `nil` isolation (`detached`), wherever it ran, which only posts the end.
    @inlinable
    func taskFinished(key: Key, id: UInt64, detached: Bool) {
        if _slowPath(detached) {
            reportFinishedElsewhere(key: key, id: id)
            return
        }
        // `removeFinished` hands the removed key out of the table access, so it is destroyed
        // here, after the access (a key's `deinit` is user code).
        guard isObserved else {
            // Nobody can be observing: finish and remove a stopped key in one access and lookup.
            _ = withMachine { $0.removeFinished(key: key, id: id) }
            return
        }
        if withMachine({ $0.finish(key: key, id: id) }) == .stopKey {
            notifyingMutation {
                // The observers' `willSet` has run: if it added a task under the key, the key
                // keeps running and only this task's slot goes.
                _ = withMachine { $0.removeFinished(key: key, id: id) }
            }
        }
    }

    @inlinable
    @inline(__always)
    func checkOwner(_ isolation: (any Actor)?, in function: StaticString) {
        guard let isolation else {
            nonisolatedCall(in: function)
            return
        }
        let id = UInt(bitPattern: ObjectIdentifier(isolation))
        let owner = ownerID.load(ordering: .acquiring)
        if _fastPath(owner == id) {
            if _slowPath(usesInbox) { drainFinishedElsewhere() }
            return
        }
        bindOwner(isolation, id: id, observedOwner: owner, in: function)
        if usesInbox { drainFinishedElsewhere() }
    }

    @usableFromInline
    func bindOwner(_ isolation: any Actor, id: UInt, observedOwner: UInt, in function: StaticString) {
        if observedOwner == 0 {
            let (exchanged, original) = ownerID.compareExchange(
                expected: 0, desired: id, ordering: .acquiringAndReleasing
            )
            if exchanged {
                ownerActor = isolation
                return
            }
            if original == id { return }
        }
        preconditionFailure(
            "TaskStore.\(function): `isolation` is \(isolation), but this store belongs to another actor "
                + "(\(ownerActor.map { "\($0)" } ?? "unknown")). A TaskStore must be used from one actor only"
        )
    }

    @usableFromInline
    func checkRead(_ function: StaticString) {
        if ownerID.load(ordering: .acquiring) != 0, let owner = ownerActor {
            owner.preconditionIsolated(
                "TaskStore.\(function) called off the executor of the actor that owns the store (\(owner))"
            )
        }
        if usesInbox { drainFinishedElsewhere() }
    }
}
