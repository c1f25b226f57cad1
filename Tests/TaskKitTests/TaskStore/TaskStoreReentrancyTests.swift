import Observation
import Testing
import TaskKit
import TaskKitTestSupport

/// Holds a main-actor store for handlers that reach it synchronously through
/// `MainActor.assumeIsolated` (cancellation and observation handlers run on the caller's thread).
@MainActor final class ReentrantStoreHolder {
    let store = TaskStore<Int>()
    /// Set by a handler when it re-enters, so it does so once: the registrar calls a tracking
    /// handler again if the handler's own change notifies before the tracking is cancelled.
    var reentered = false

    /// Observes key 1; on the next change of the store (the registrar's `willSet`, which runs
    /// synchronously inside the store's update) adds a task under key 1 that waits for
    /// `release`, once.
    func addTaskOnNextChange(waitingFor release: TestGate) {
        withObservationTracking {
            _ = store.taskIsRunning(forKey: 1)
        } onChange: { [self] in
            MainActor.assumeIsolated {
                guard !reentered else { return }
                reentered = true
                _ = store.addTask(forKey: 1) { await release.wait() }
            }
        }
    }
}

/// User code that the store runs synchronously in the middle of `addTask` (a previous task's
/// cancellation handler, an observer's `willSet` handler) and that calls back into the store.
/// Contrived, but nothing it adds may be lost from tracking.
@MainActor
@Suite struct TaskStoreReentrancyTests {
    @Test(.scaledTimeLimit(minutes: 1))
    func aTaskAddedFromAPreviousTasksCancellationHandlerStaysTracked() async throws {
        let holder = ReentrantStoreHolder()
        let started = TestGate(), release = TestGate(), reentrantRelease = TestGate()
        let first = holder.store.addTask(forKey: 1) {
            await withTaskCancellationHandler {
                started.open()
                await release.wait()
            } onCancel: {
                // Runs inside the next `addTask`, which cancels this task.
                MainActor.assumeIsolated {
                    _ = holder.store.addTask(forKey: 1, duplicateKeyBehavior: .runConcurrently) {
                        await reentrantRelease.wait()
                    }
                }
            }
        }
        await started.wait()
        let second = holder.store.addTask(forKey: 1) {}  // cancels `first`
        release.open()
        try await first.boundedValue()
        await second.value
        #expect(holder.store.taskIsRunning(forKey: 1), "the task added from the handler still runs")
        reentrantRelease.open()
        await eventually("key 1 finished") { !holder.store.taskIsRunning(forKey: 1) }
        #expect(holder.store.runningKeys.isEmpty)
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aTaskAddedFromAnObserversChangeHandlerStaysTracked() async {
        let holder = ReentrantStoreHolder()
        let outerRelease = TestGate(), reentrantRelease = TestGate()
        // Runs inside the next `addTask`, just before the key is recorded as running.
        holder.addTaskOnNextChange(waitingFor: reentrantRelease)
        let outer = holder.store.addTask(forKey: 1) { await outerRelease.wait() }
        outerRelease.open()
        await outer.value
        #expect(holder.store.taskIsRunning(forKey: 1), "the task added from the handler still runs")
        reentrantRelease.open()
        await eventually("key 1 finished") { !holder.store.taskIsRunning(forKey: 1) }
        #expect(holder.store.runningKeys.isEmpty)
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func aTaskAddedFromAnObserversChangeHandlerWhileItsKeyStopsStaysTracked() async {
        let holder = ReentrantStoreHolder()
        let outerRelease = TestGate(), reentrantRelease = TestGate()
        let outer = holder.store.addTask(forKey: 1) { await outerRelease.wait() }
        // Runs inside the outer task's finish, just before key 1 is removed.
        holder.addTaskOnNextChange(waitingFor: reentrantRelease)
        outerRelease.open()
        await outer.value
        #expect(holder.reentered, "the handler ran when the key stopped")
        #expect(holder.store.taskIsRunning(forKey: 1), "the task added from the handler still runs")
        reentrantRelease.open()
        await eventually("key 1 finished") { !holder.store.taskIsRunning(forKey: 1) }
        #expect(holder.store.runningKeys.isEmpty)
    }

    @Test func aKeyWhoseDeinitReadsTheStoreRunsOutsideTheTableAccess() async {
        // The table keeps the first of two equal keys; when the task that replaced the first
        // one finishes, removing the entry destroys that key, and its `deinit` (user code) reads
        // the store. That must happen after the table access, not trap inside it.
        await #expect(processExitsWith: .success) {
            await MainActor.run {
                let store = TaskStore<TokenKey>()
                TokenKey.Token.store = store
                let first = store.addTask(forKey: TokenKey(id: 1, token: TokenKey.Token())) {
                    _ = try? await Task.sleep(for: .seconds(60))
                }
                _ = store.addTask(forKey: TokenKey(id: 1, token: TokenKey.Token())) {
                    try await first.boundedValue()  // the replaced task (cancelled) ends first
                }
            }
            await eventually("both tasks finished") {
                await MainActor.run(body: { TokenKey.Token.store?.runningKeys.isEmpty != false })
            }
            let readTheStore = await MainActor.run { TokenKey.Token.deinitReadTheStore }
            precondition(readTheStore, "the first key's deinit did not run")
        }
    }

    @Test func aKeyWhoseHashingReadsTheStoreTrapsInsteadOfCorruptingIt() async {
        // `Key.hash(into:)` runs inside the store's table accesses; the store's guard on that
        // table (`withMachine`) turns the overlapping read into a trap. Without it the read
        // dereferences the table while the insertion has it moved out (a crash, or worse): the
        // check on standard error tells the two failures apart.
        let exit = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await MainActor.run {
                let store = TaskStore<StoreReadingKey>()
                StoreReadingKey.store = store
                store.addTask(forKey: StoreReadingKey(id: 1)) {}
            }
        }
        let standardError = String(decoding: exit?.standardErrorContent ?? [], as: UTF8.self)
        #expect(standardError.contains("A key's Hashable conformance must not use the store it is a key of"))
    }
}

/// A pathological key: hashing it reads the store it is a key of.
struct StoreReadingKey: Hashable, Sendable {
    @MainActor static var store: TaskStore<StoreReadingKey>?
    @MainActor static var isReading = false
    var id: Int

    func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        MainActor.assumeIsolated {
            // Once, not recursively (`runningKeys` hashes the keys again): without the store's
            // guard the read would then succeed and the process would exit normally.
            guard !Self.isReading else { return }
            Self.isReading = true
            defer { Self.isReading = false }
            _ = Self.store?.runningKeys
        }
    }
}

/// A key whose equality and hash ignore `token`, a class whose `deinit` reads the store.
struct TokenKey: Hashable, Sendable {
    final class Token: Sendable {
        @MainActor static var store: TaskStore<TokenKey>?
        @MainActor static var deinitReadTheStore = false

        deinit {
            MainActor.assumeIsolated {
                _ = Self.store?.runningKeys
                Self.deinitReadTheStore = true
            }
        }
    }

    var id: Int
    var token: Token

    static func == (lhs: Self, rhs: Self) -> Bool { lhs.id == rhs.id }
    func hash(into hasher: inout Hasher) { hasher.combine(id) }
}
