import Testing
@testable import TaskKit
import TaskKitTestSupport

/// The pure parts of `KeyedMonoTask`: the entry table (against a simple model) and the state
/// machine's rules, with plain values as waiters and time passed in. No concurrency.
@Suite struct KeyedMonoTaskStateMachineTests {
    typealias Table = KeyedMonoTaskEntryTable<Int, String>
    typealias Machine = KeyedMonoTaskStateMachine<Int, String, String>

    // MARK: Table

    /// Checks the table's invariants: dense nodes, index consistent, the list exactly the nodes
    /// without a load, in the model's recency order.
    static func check(_ table: Table, recency: [Int], loading: Set<Int>, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(table.count == recency.count + loading.count, sourceLocation: sourceLocation)
        #expect(table.index.count == table.count, sourceLocation: sourceLocation)
        #expect(table.links.count == table.count, sourceLocation: sourceLocation)
        for (key, slot) in table.index {
            #expect(table.nodes[Int(slot)].key == key, sourceLocation: sourceLocation)
        }
        #expect(table.recencyOrder.map { table.nodes[Int($0)].key } == recency, sourceLocation: sourceLocation)
        // Backward links mirror the forward ones.
        var backward: [Int] = []
        var slot = table.tail
        while slot != Table.none {
            backward.append(table.nodes[Int(slot)].key)
            slot = table.links[Int(slot)].previous
        }
        #expect(backward == recency.reversed(), sourceLocation: sourceLocation)
        for key in loading {
            #expect(table.find(key).map { table.nodes[Int($0)].load != 0 } == true, sourceLocation: sourceLocation)
        }
    }

    @Test func theTableMatchesAModelUnderRandomOperations() {
        var generator = SeededRandomNumberGenerator(seed: 21)
        var table = Table()
        var recency: [Int] = []  // most recent first
        var loading: Set<Int> = []
        for step in 0..<20_000 {
            let key = Int(generator.next() % 64)
            switch generator.next() % 6 {
            case 0:  // a miss: insert as loading
                if table.find(key) == nil {
                    _ = table.insertLoading(key, generation: UInt64(step + 1))
                    loading.insert(key)
                }
            case 1:  // a load ends: into the list at the head
                if loading.contains(key) {
                    table.endLoad(table.find(key)!)
                    loading.remove(key)
                    recency.insert(key, at: 0)
                }
            case 2:  // a hit
                if let slot = table.find(key) {
                    table.touch(slot)
                    if let index = recency.firstIndex(of: key) {
                        recency.remove(at: index)
                        recency.insert(key, at: 0)
                    }
                }
            case 3:  // a refresh starts
                if let slot = table.find(key), !loading.contains(key) {
                    table.beginLoad(slot, generation: UInt64(step + 1))
                    recency.removeAll { $0 == key }
                    loading.insert(key)
                }
            case 4:  // invalidate
                if let slot = table.find(key) {
                    let removed = table.remove(slot)
                    #expect(removed.node.key == key && removed.indexKey == key)
                    recency.removeAll { $0 == key }
                    loading.remove(key)
                }
            default:  // evict
                let evicted = table.evictLeastRecentlyUsed(keepingHead: step % 2 == 0)
                if recency.isEmpty || (step % 2 == 0 && recency.count == 1) {
                    #expect(evicted == nil)
                } else {
                    #expect(evicted?.node.key == recency.last)
                    recency.removeLast()
                }
            }
            if step % 97 == 0 { Self.check(table, recency: recency, loading: loading) }
        }
        Self.check(table, recency: recency, loading: loading)
    }

    // MARK: Machine

    static func machine(max: Int = 10, ttl: Duration = .seconds(10), stale: Duration = .zero, retry: RetryCount = .never) -> Machine {
        Machine(configuration: .init(maximumEntries: max, timeToLive: ttl, staleWhileRevalidate: stale, retry: retry))
    }

    /// Registers a waiter through the fast path + request, as the owner does.
    static func ask(
        _ machine: inout Machine, _ key: Int, _ waiter: String, force: Bool = false, at now: Duration = .zero
    ) -> Machine.RequestAction {
        switch machine.fastPath(key: key, forceUpdate: force, now: now) {
        case .hit(let value, let refresh): return .deliverCached(value, refresh: refresh)
        case .miss(let id): return machine.request(key: key, waiter: waiter, id: id, forceUpdate: force, now: now)
        }
    }

    static func started(_ action: Machine.RequestAction) -> Machine.StartLoad? {
        if case .enqueued(let start?, _) = action { return start }
        return nil
    }

    @Test func oneLoadPerKeyAndItsResultGoesToEveryWaiterInOrder() {
        var machine = Self.machine()
        let start = Self.started(Self.ask(&machine, 1, "a"))!
        #expect(Self.started(Self.ask(&machine, 1, "b")) == nil)
        #expect(Self.started(Self.ask(&machine, 2, "c"))?.key == 2)
        guard case .finish(let waiters, _, nil, _) = machine.attemptFinished(
            generation: start.generation, result: .success("v"), now: .seconds(1)
        ) else { Issue.record("no finish"); return }
        #expect(waiters == ["a", "b"])
        #expect(machine.cachedValue(for: 1, now: .seconds(10)) == "v")
        #expect(machine.cachedValue(for: 1, now: .seconds(11)) == nil)  // TTL from completion (1 s)
        #expect(machine.counters.merges == 1 && machine.counters.loads == 2)
    }

    @Test func aCancelledWaiterIsHandedBackOnceAndNotDeliveredTo() {
        var machine = Self.machine()
        let start = Self.started(Self.ask(&machine, 1, "a"))!
        _ = Self.ask(&machine, 1, "b")
        #expect(machine.cancelWaiter(key: 1, id: 1) == "a")
        #expect(machine.cancelWaiter(key: 1, id: 1) == nil)
        guard case .finish(let waiters, _, _, _) = machine.attemptFinished(
            generation: start.generation, result: .success("v"), now: .zero
        ) else { Issue.record("no finish"); return }
        #expect(waiters == ["b"])
    }

    @Test func aDetachedLoadDeliversToItsOwnWaitersAndStoresNothing() {
        var machine = Self.machine()
        let old = Self.started(Self.ask(&machine, 1, "old"))!
        let (restart, _) = machine.invalidate(1)
        #expect(restart == nil)
        let new = Self.started(Self.ask(&machine, 1, "new"))!
        #expect(new.generation != old.generation)
        guard case .finish(let oldWaiters, _, _, _) = machine.attemptFinished(
            generation: old.generation, result: .success("stale"), now: .zero
        ) else { Issue.record("no finish"); return }
        #expect(oldWaiters == ["old"])
        #expect(machine.cachedValue(for: 1, now: .zero) == nil)
        guard case .finish(let newWaiters, _, _, _) = machine.attemptFinished(
            generation: new.generation, result: .success("fresh"), now: .zero
        ) else { Issue.record("no finish"); return }
        #expect(newWaiters == ["new"])
        #expect(machine.cachedValue(for: 1, now: .zero) == "fresh")
        #expect(machine.detachedLoads == 0 && machine.loadsInFlight == 0)
    }

    @Test func evictionSkipsLoadingEntriesAndTheBoundReturnsAtTheNextCompletion() {
        var machine = Self.machine(max: 2)
        let a = Self.started(Self.ask(&machine, 1, "a"))!
        let b = Self.started(Self.ask(&machine, 2, "b"))!
        let c = Self.started(Self.ask(&machine, 3, "c"))!
        #expect(machine.count == 3)
        _ = machine.attemptFinished(generation: a.generation, result: .success("1"), now: .zero)
        #expect(machine.count == 3)  // kept: every other entry is loading
        _ = machine.attemptFinished(generation: b.generation, result: .failure(TestFailure()), now: .zero)
        #expect(machine.count == 2)  // a failure leaves nothing behind
        _ = machine.attemptFinished(generation: c.generation, result: .success("3"), now: .zero)
        #expect(machine.count == 2)
        #expect(machine.counters.evictions == 0)
        // A new key at the bound evicts the least recently used value (1).
        _ = Self.ask(&machine, 4, "d")
        #expect(machine.count == 2)
        #expect(machine.cachedValue(for: 1, now: .zero) == nil)
        #expect(machine.cachedValue(for: 3, now: .zero) == "3")
        #expect(machine.counters.evictions == 1)
    }

    @Test func aStaleHitStartsOneRefreshAndAFailedRefreshKeepsTheValue() {
        var machine = Self.machine(ttl: .seconds(10), stale: .seconds(5))
        let first = Self.started(Self.ask(&machine, 1, "a"))!
        _ = machine.attemptFinished(generation: first.generation, result: .success("v1"), now: .zero)
        guard case .deliverCached("v1", let refresh?) = Self.ask(&machine, 1, "b", at: .seconds(12)) else {
            Issue.record("no stale hit with refresh"); return
        }
        guard case .deliverCached("v1", nil) = Self.ask(&machine, 1, "c", at: .seconds(13)) else {
            Issue.record("a second refresh started"); return
        }
        guard case .finish([], _, nil, _) = machine.attemptFinished(
            generation: refresh.generation, result: .failure(TestFailure()), now: .seconds(14)
        ) else { Issue.record("no finish"); return }
        #expect(machine.cachedValue(for: 1, now: .seconds(14)) == "v1")
        #expect(machine.cachedValue(for: 1, now: .seconds(15)) == nil)
    }

    @Test func aForcedCallerDuringALoadWaitsForTheFollowUpLoad() {
        var machine = Self.machine()
        let first = Self.started(Self.ask(&machine, 1, "a"))!
        _ = Self.ask(&machine, 1, "forced", force: true)
        _ = Self.ask(&machine, 1, "plain")
        guard case .finish(let waiters, _, let next?, _) = machine.attemptFinished(
            generation: first.generation, result: .success("v1"), now: .zero
        ) else { Issue.record("no follow-up"); return }
        #expect(waiters == ["a", "plain"])
        guard case .finish(let followers, _, nil, _) = machine.attemptFinished(
            generation: next.generation, result: .success("v2"), now: .zero
        ) else { Issue.record("no finish"); return }
        #expect(followers == ["forced"])
        #expect(machine.cachedValue(for: 1, now: .zero) == "v2")
    }

    @Test func retriesAreScheduledAndOnlyTheFinalOutcomeIsDelivered() {
        var machine = Self.machine(retry: .count(count: 2, intervalProxy: .fixed(.seconds(3))))
        let load = Self.started(Self.ask(&machine, 1, "a"))!
        for _ in 0..<2 {
            guard case .retry(let delay) = machine.attemptFinished(
                generation: load.generation, result: .failure(TestFailure()), now: .zero
            ) else { Issue.record("no retry"); return }
            #expect(delay == .seconds(3))
            machine.retryDue(generation: load.generation)
        }
        guard case .finish(["a"], .failure, nil, _) = machine.attemptFinished(
            generation: load.generation, result: .failure(TestFailure()), now: .zero
        ) else { Issue.record("no final failure"); return }
        #expect(machine.counters.retries == 2 && machine.counters.failures == 1)
        #expect(machine.count == 0)
    }

    @Test func jitterComesFromTheInjectedGeneratorSoEveryDelayIsKnown() {
        let proxy = IntervalProxy.exponential(initial: .seconds(1), scaleRate: 2, jitter: .full)
        var machine = Machine(configuration: .init(
            maximumEntries: 10, timeToLive: .seconds(10), staleWhileRevalidate: .zero,
            retry: .count(count: 3, intervalProxy: proxy), jitter: RetryJitter(SeededRandomNumberGenerator(seed: 5))
        ))
        var expected = RetryCount.count(count: 3, intervalProxy: proxy).makeSchedule()
        var reference = SeededRandomNumberGenerator(seed: 5)
        let load = Self.started(Self.ask(&machine, 1, "a"))!
        for _ in 0..<3 {
            guard case .retry(let delay) = machine.attemptFinished(
                generation: load.generation, result: .failure(TestFailure()), now: .zero
            ) else { Issue.record("no retry"); return }
            let pinned = expected.nextDelay(using: &reference)
            #expect(delay == pinned)
            machine.retryDue(generation: load.generation)
        }
    }

    struct TestFailure: Error {}
}

