import Testing
@testable import TaskKit
import TaskKitTestSupport

/// The pure parts of `KeyedMonoTask`: the entry table (against a simple model) and the state
/// machine's rules, with plain values as waiters and time passed in. No concurrency.
@Suite struct KeyedMonoTaskStateMachineTests {
    typealias Table = KeyedMonoTaskEntryTable<Int, String>
    typealias Machine = KeyedMonoTaskStateMachine<Int, String, String>

    // MARK: Table

    /// SIEVE as the documentation states it, on keys: the queue newest first, the read marks, and
    /// the key the hand rests on (`nil`: the tail).
    struct SieveModel {
        var queue: [Int] = []
        var read: Set<Int> = []
        var hand: Int?

        mutating func enter(_ key: Int) { queue.insert(key, at: 0) }

        mutating func leave(_ key: Int) {
            let index = queue.firstIndex(of: key)!
            if hand == key { hand = index > 0 ? queue[index - 1] : nil }
            queue.remove(at: index)
        }

        mutating func evict(keepingHead: Bool) -> Int? {
            guard !queue.isEmpty, !(keepingHead && queue.count == 1) else { return nil }
            var index = hand.map { queue.firstIndex(of: $0)! } ?? queue.count - 1
            while true {
                if !(keepingHead && index == 0) {
                    if !read.contains(queue[index]) { break }
                    read.remove(queue[index])
                }
                index = index == 0 ? queue.count - 1 : index - 1
            }
            let key = queue[index]
            hand = key  // leaving, the hand moves to the evicted key's newer neighbour
            leave(key)
            return key
        }
    }

    /// Checks the table's invariants: dense nodes, index consistent, the queue exactly the nodes
    /// without a load, in the model's order, with the model's marks and hand.
    static func check(_ table: Table, model: SieveModel, loading: Set<Int>, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(table.count == model.queue.count + loading.count, sourceLocation: sourceLocation)
        #expect(table.index.count == table.count, sourceLocation: sourceLocation)
        #expect(table.links.count == table.count, sourceLocation: sourceLocation)
        for (key, slot) in table.index {
            #expect(table.nodes[Int(slot)].key == key, sourceLocation: sourceLocation)
            #expect(table.nodes[Int(slot)].read == model.read.contains(key), sourceLocation: sourceLocation)
        }
        #expect(table.queueOrder.map { table.nodes[Int($0)].key } == model.queue, sourceLocation: sourceLocation)
        #expect(
            (table.hand == Table.none ? nil : table.nodes[Int(table.hand)].key) == model.hand,
            sourceLocation: sourceLocation
        )
        // Backward links mirror the forward ones.
        var backward: [Int] = []
        var slot = table.tail
        while slot != Table.none {
            backward.append(table.nodes[Int(slot)].key)
            slot = table.links[Int(slot)].previous
        }
        #expect(backward == model.queue.reversed(), sourceLocation: sourceLocation)
        for key in loading {
            #expect(table.find(key).map { table.load(of: $0) != 0 } == true, sourceLocation: sourceLocation)
        }
    }

    @Test func theTableMatchesASieveModelUnderRandomOperations() {
        var generator = SeededRandomNumberGenerator(seed: 21)
        var table = Table()
        var model = SieveModel()
        var loading: Set<Int> = []
        /// Keys read since the previous eviction: the documented promise is that none of them is
        /// evicted while the queue holds an unread key (other than a head being kept).
        var readSinceEviction: Set<Int> = []
        var evictions = 0
        var wrappedEvictions = 0
        for step in 0..<40_000 {
            let key = Int(generator.next() % 64)
            switch generator.next() % 8 {
            case 0, 1:  // a miss: insert as loading
                if table.find(key) == nil {
                    _ = table.insertLoading(key, generation: UInt64(step + 1))
                    loading.insert(key)
                    model.read.remove(key)
                }
            case 2:  // a load ends: into the queue at the head
                if loading.contains(key) {
                    table.endLoad(table.find(key)!)
                    loading.remove(key)
                    model.enter(key)
                }
            case 3, 4:  // a hit
                if let slot = table.find(key) {
                    table.markRead(slot)
                    model.read.insert(key)
                    readSinceEviction.insert(key)
                }
            case 5:  // a refresh starts
                if let slot = table.find(key), !loading.contains(key) {
                    table.beginLoad(slot, generation: UInt64(step + 1))
                    model.leave(key)
                    loading.insert(key)
                }
            case 6:  // invalidate
                if let slot = table.find(key) {
                    let removed = table.remove(slot)
                    #expect(removed.node.key == key && removed.indexKey == key)
                    if !loading.contains(key) { model.leave(key) }
                    model.read.remove(key)
                    loading.remove(key)
                }
            default:  // evict
                let keepingHead = step % 2 == 0
                let candidates = keepingHead ? model.queue.dropFirst() : model.queue[...]
                let someUnread = candidates.contains { !model.read.contains($0) }
                let expected = model.evict(keepingHead: keepingHead)
                let evicted = table.evict(keepingHead: keepingHead)
                #expect(evicted?.node.key == expected)
                if let expected {
                    evictions += 1
                    if someUnread {
                        #expect(!readSinceEviction.contains(expected), "a key read since the last eviction went")
                    } else {
                        wrappedEvictions += 1
                    }
                    model.read.remove(expected)
                    readSinceEviction = []
                }
            }
            if step % 97 == 0 { Self.check(table, model: model, loading: loading) }
        }
        Self.check(table, model: model, loading: loading)
        #expect(evictions > 1_000 && wrappedEvictions > 10, "both kinds of eviction exercised")
    }

    // MARK: Machine

    @Test func durationsBecomeNanosecondsClampedToForever() {
        #expect(Machine.nanoseconds(.milliseconds(1.5)) == 1_500_000)
        #expect(Machine.nanoseconds(.seconds(-2)) == -2_000_000_000)
        #expect(Machine.nanoseconds(.seconds(Int64.max)) == Machine.Configuration.forever)
        #expect(Machine.nanoseconds(.seconds(Int64.min)) == -Machine.Configuration.forever)
        let configuration = Machine.Configuration(
            maximumEntries: 1, timeToLive: .seconds(10), staleWhileRevalidate: .seconds(5), retry: .never
        )
        #expect(configuration.timeToLive == 10_000_000_000 && configuration.usableFor == 15_000_000_000)
        let forever = Machine.Configuration(maximumEntries: 1, timeToLive: nil, staleWhileRevalidate: .zero, retry: .never)
        #expect(forever.timeToLive == Machine.Configuration.forever && forever.keepsResults)
    }

    static func machine(
        max: Int = 10, ttl: Duration = .seconds(10), stale: Duration = .zero, retry: RetryCount = .never,
        failSafe: FailSafe? = nil
    ) -> Machine {
        Machine(
            configuration: .init(
                maximumEntries: max, timeToLive: ttl, staleWhileRevalidate: stale, retry: retry, failSafe: failSafe
            )
        )
    }

    /// Registers a waiter through the fast path + request, as the owner does.
    static func ask(
        _ machine: inout Machine, _ key: Int, _ waiter: String, force: Bool = false, at now: Int64 = .zero
    ) -> Machine.RequestAction {
        switch machine.fastPath(key: key, hashValue: key.hashValue, forceUpdate: force, now: now) {
        case .hit(let value, let refresh): return .deliverCached(value, refresh: refresh)
        case .miss(let id):
            return machine.request(key: key, hashValue: key.hashValue, waiter: waiter, id: id, forceUpdate: force, now: now)
        }
    }

    static func started(_ action: Machine.RequestAction) -> Machine.StartLoad? {
        if case .enqueued(let start?, _, _) = action { return start }
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
        #expect(waiters.map(\.waiter) == ["a", "b"])
        #expect(machine.cachedValue(for: 1, now: .seconds(10)) == "v")
        #expect(machine.cachedValue(for: 1, now: .seconds(11)) == nil)  // TTL from completion (1 s)
        #expect(machine.counters.merges == 1 && machine.counters.loads == 2)
    }

    @Test func aValuesOwnTimeToLiveReplacesTheConfiguredOneAndTheStaleWindowFollowsIt() {
        var machine = Self.machine(ttl: .seconds(10), stale: .seconds(5))
        let long = Self.started(Self.ask(&machine, 1, "a"))!
        _ = machine.attemptFinished(generation: long.generation, result: .success("long"), expiresIn: .seconds(60), now: .seconds(1))
        #expect(machine.cachedValue(for: 1, now: .seconds(60)) == "long")  // fresh: 1 s + 60 s
        #expect(Self.ask(&machine, 1, "b").isCached("long", refreshing: false))
        #expect(Self.ask(&machine, 1, "c", at: .seconds(62)).isCached("long", refreshing: true))  // stale
        let short = Self.started(Self.ask(&machine, 2, "d"))!
        _ = machine.attemptFinished(generation: short.generation, result: .success("short"), expiresIn: .seconds(1), now: .zero)
        #expect(machine.cachedValue(for: 2, now: .milliseconds(999)) == "short")
        #expect(Self.ask(&machine, 2, "e", at: .seconds(2)).isCached("short", refreshing: true))
        #expect(machine.cachedValue(for: 2, now: .seconds(6)) == nil)  // 1 s + the 5 s window
        // No own time to live: the configured one; a negative one counts as zero (stale at once).
        let plain = Self.started(Self.ask(&machine, 3, "f"))!
        _ = machine.attemptFinished(generation: plain.generation, result: .success("plain"), expiresIn: nil, now: .zero)
        #expect(machine.cachedValue(for: 3, now: .milliseconds(9_999)) == "plain")
        let negative = Self.started(Self.ask(&machine, 4, "g"))!
        _ = machine.attemptFinished(generation: negative.generation, result: .success("past"), expiresIn: .seconds(-3), now: .zero)
        #expect(Self.ask(&machine, 4, "h").isCached("past", refreshing: true))
    }

    @Test func aValuesOwnTimeToLiveKeepsItWhereTheConfiguredOneKeepsNothing() {
        var machine = Self.machine(ttl: .zero)
        let token = Self.started(Self.ask(&machine, 1, "a"))!
        _ = machine.attemptFinished(generation: token.generation, result: .success("token"), expiresIn: .seconds(30), now: .zero)
        #expect(machine.cachedValue(for: 1, now: .seconds(29)) == "token")
        #expect(machine.cachedValue(for: 1, now: .seconds(30)) == nil)
        let kept = machine.count
        let zero = Self.started(Self.ask(&machine, 2, "b"))!
        _ = machine.attemptFinished(generation: zero.generation, result: .success("now"), expiresIn: .zero, now: .zero)
        #expect(machine.cachedValue(for: 2, now: .zero) == nil)
        #expect(machine.count == kept)  // delivered, not kept
        _ = machine.cacheExtra(key: 5, value: "extra", expiresIn: .seconds(2), now: .zero)
        #expect(machine.cachedValue(for: 5, now: .seconds(1)) == "extra")
        _ = machine.cacheExtra(key: 6, value: "dropped", now: .zero)
        #expect(machine.cachedValue(for: 6, now: .zero) == nil)
    }

    @Test func aKeptFailureAnswersCallersUntilItExpiresThenTheNextCallerLoads() {
        var machine = Self.machine()
        let first = Self.started(Self.ask(&machine, 1, "a"))!
        _ = Self.ask(&machine, 1, "joined")  // joins the load in flight: gets its failure from it
        guard case .finish(let waiters, .failure, _, _) = machine.attemptFinished(
            generation: first.generation, result: .failure(TestFailure()), failureExpiresIn: .seconds(30), now: .zero
        ) else { Issue.record("no finish"); return }
        #expect(waiters.map(\.waiter) == ["a", "joined"])
        for now: Int64 in [.zero, .seconds(29)] {
            guard case .deliverFailure(let error) = Self.ask(&machine, 1, "b", at: now) else {
                Issue.record("the kept failure answers at \(now)"); return
            }
            #expect(error is TestFailure)
        }
        #expect(machine.counters.negativeHits == 2 && machine.counters.hits == 0 && machine.counters.loads == 1)
        // A forced call loads regardless; at its expiry, the next caller loads.
        #expect(Self.started(Self.ask(&machine, 1, "forced", force: true, at: .seconds(1))) != nil)
        var other = Self.machine()
        let load = Self.started(Self.ask(&other, 2, "a"))!
        _ = other.attemptFinished(generation: load.generation, result: .failure(TestFailure()), failureExpiresIn: .seconds(30), now: .zero)
        let again = Self.started(Self.ask(&other, 2, "late", at: .seconds(30)))!
        // A success ends it; so does invalidate.
        _ = other.attemptFinished(generation: again.generation, result: .success("found"), now: .seconds(30))
        #expect(other.failures.isEmpty)
        let third = Self.started(Self.ask(&other, 3, "a"))!
        _ = other.attemptFinished(generation: third.generation, result: .failure(TestFailure()), failureExpiresIn: .seconds(30), now: .zero)
        _ = other.invalidate(3)
        #expect(Self.started(Self.ask(&other, 3, "after")) != nil)
    }

    @Test func failuresWithoutATimeToLiveAreNotKeptAndKeptOnesStayWithinTheBound() {
        var machine = Self.machine(max: 2)
        let plain = Self.started(Self.ask(&machine, 1, "a"))!
        _ = machine.attemptFinished(generation: plain.generation, result: .failure(TestFailure()), now: .zero)
        #expect(Self.started(Self.ask(&machine, 1, "b")) != nil)  // not kept: loads again
        for key in 10..<15 {
            let load = Self.started(Self.ask(&machine, key, "k"))!
            _ = machine.attemptFinished(
                generation: load.generation, result: .failure(TestFailure()), failureExpiresIn: .seconds(60), now: .zero
            )
            #expect(machine.failures.count <= 2)
        }
        #expect(Set(machine.failures.keys) == [13, 14])  // the oldest went first
    }

    // MARK: Fail-safe

    /// Loads `key`'s value `value` at `now` in `machine` (nothing else in flight for it).
    static func loaded(_ machine: inout Machine, _ key: Int, _ value: String, at now: Int64 = .zero) {
        let load = started(ask(&machine, key, "loader", at: now))!
        _ = machine.attemptFinished(generation: load.generation, result: .success(value), now: now)
    }

    /// Fails the load `start` at `now`; returns what its waiters got.
    static func fail(
        _ machine: inout Machine, _ start: Machine.StartLoad, _ error: any Error = TestFailure(), at now: Int64,
        failureExpiresIn: Int64? = nil
    ) -> (waiters: [String], result: Result<String, any Error>)? {
        guard case .finish(let waiters, let result, _, _) = machine.attemptFinished(
            generation: start.generation, result: .failure(error), failureExpiresIn: failureExpiresIn, now: now
        ) else { return nil }
        return (waiters.map(\.waiter), result)
    }

    @Test func aFailedReloadIsAnsweredWithTheExpiredValueWhichThenServesForTheThrottle() throws {
        var machine = Self.machine(ttl: .seconds(10), failSafe: FailSafe(maximumStaleness: .seconds(60), throttle: .seconds(5)))
        Self.loaded(&machine, 1, "old")
        // Expired at 10 s; the reload keeps the value to answer for a failure, and callers join it.
        let reload = try #require(Self.started(Self.ask(&machine, 1, "a", at: .seconds(12))))
        guard case .enqueued(nil, _, _) = Self.ask(&machine, 1, "b", at: .seconds(13)) else {
            Issue.record("a caller during the reload joins it"); return
        }
        let failed = try #require(Self.fail(&machine, reload, at: .seconds(14)))
        #expect(failed.waiters == ["a", "b"])
        #expect(try failed.result.get() == "old")
        #expect(machine.counters.failSafeHits == 2 && machine.counters.failures == 1)
        // Served as fresh for the throttle: no load until 14 s + 5 s.
        #expect(Self.ask(&machine, 1, "c", at: .seconds(18)).isCached("old", refreshing: false))
        let loadsBefore = machine.counters.loads
        let second = try #require(Self.started(Self.ask(&machine, 1, "d", at: .seconds(19))))
        #expect(machine.counters.loads == loadsBefore + 1)
        // Another failure within the maximum staleness (counted from the first expiry, 10 s).
        #expect(try Self.fail(&machine, second, at: .seconds(20))?.result.get() == "old")
        // A success ends the fail-safe: the next failure after expiry is counted afresh.
        let third = try #require(Self.started(Self.ask(&machine, 1, "e", at: .seconds(25))))
        _ = machine.attemptFinished(generation: third.generation, result: .success("new"), now: .seconds(25))
        #expect(machine.failSafeSince.isEmpty)
        #expect(Self.ask(&machine, 1, "f", at: .seconds(34)).isCached("new", refreshing: false))
    }

    @Test func pastTheMaximumStalenessOrWithoutAValueTheCallersGetTheError() throws {
        var machine = Self.machine(ttl: .seconds(10), failSafe: FailSafe(maximumStaleness: .seconds(30), throttle: .seconds(5)))
        // No value at all: the error.
        let first = try #require(Self.started(Self.ask(&machine, 2, "a")))
        #expect(throws: TestFailure.self) { try Self.fail(&machine, first, at: .zero)?.result.get() }
        // Expired 10 s, reloads fail every throttle until 10 s + 30 s; then the error, and the
        // value is gone.
        Self.loaded(&machine, 1, "old")
        var now: Int64 = .seconds(10)
        while now <= .seconds(40) {
            let reload = try #require(Self.started(Self.ask(&machine, 1, "w", at: now)))
            #expect(try Self.fail(&machine, reload, at: now)?.result.get() == "old", "at \(now / 1_000_000_000) s")
            now += .seconds(5)
        }
        // The last throttle ends at 45 s, 35 s past the expiry: beyond the bound.
        let late = try #require(Self.started(Self.ask(&machine, 1, "late", at: now)))
        #expect(throws: TestFailure.self) { try Self.fail(&machine, late, at: now)?.result.get() }
        #expect(machine.cachedValue(for: 1, now: now) == nil && machine.count == 0)
        #expect(machine.failSafeSince.isEmpty)
        // A reload that starts beyond the bound drops the value at once: nothing to answer with.
        Self.loaded(&machine, 3, "three")
        let beyond = try #require(Self.started(Self.ask(&machine, 3, "x", at: .seconds(41))))
        #expect(throws: TestFailure.self) { try Self.fail(&machine, beyond, at: .seconds(41))?.result.get() }
    }

    @Test func theFailSafeNeverAnswersACancellationNorAFreshValuesForcedReload() throws {
        var machine = Self.machine(ttl: .seconds(10), failSafe: FailSafe(maximumStaleness: .seconds(60)))
        Self.loaded(&machine, 1, "v")
        let cancelled = try #require(Self.started(Self.ask(&machine, 1, "a", at: .seconds(11))))
        #expect(throws: CancellationError.self) {
            try Self.fail(&machine, cancelled, CancellationError(), at: .seconds(11))?.result.get()
        }
        Self.loaded(&machine, 2, "fresh")
        let forced = try #require(Self.started(Self.ask(&machine, 2, "f", force: true, at: .seconds(1))))
        #expect(throws: TestFailure.self) { try Self.fail(&machine, forced, at: .seconds(1))?.result.get() }
        #expect(machine.cachedValue(for: 2, now: .seconds(1)) == "fresh")  // kept, as without
        #expect(machine.counters.failSafeHits == 0)
    }

    @Test func aFailedBackgroundRefreshExtendsTheStaleValueAndInvalidationOrEvictionEndsTheFailSafe() throws {
        var machine = Self.machine(
            max: 2, ttl: .seconds(10), stale: .seconds(5), failSafe: FailSafe(maximumStaleness: .seconds(60))
        )
        Self.loaded(&machine, 1, "v")
        guard case .deliverCached("v", let refresh?) = Self.ask(&machine, 1, "a", at: .seconds(11)) else {
            Issue.record("a stale hit starts a refresh"); return
        }
        let refreshed = try #require(Self.fail(&machine, refresh, at: .seconds(12)))
        #expect(refreshed.waiters.isEmpty && (try? refreshed.result.get()) == "v")
        // Fresh again for the default throttle (30 s): no refresh before 42 s.
        #expect(Self.ask(&machine, 1, "b", at: .seconds(41)).isCached("v", refreshing: false))
        #expect(machine.failSafeSince[1] == .seconds(10))
        _ = machine.invalidate(1)
        #expect(machine.failSafeSince.isEmpty)
        // Evicted while failing safe: forgotten too.
        Self.loaded(&machine, 1, "again", at: .seconds(50))
        let reload = try #require(Self.started(Self.ask(&machine, 1, "c", at: .seconds(70))))
        _ = Self.fail(&machine, reload, at: .seconds(70))
        #expect(machine.failSafeSince[1] == .seconds(60))
        Self.loaded(&machine, 2, "two", at: .seconds(71))
        Self.loaded(&machine, 3, "three", at: .seconds(71))  // evicts 1 (unread since it was kept)
        #expect(machine.cachedValue(for: 1, now: .seconds(71)) == nil)
        #expect(machine.failSafeSince.isEmpty)
    }

    @Test func aSoftTimeoutAnswersAWaitingCallerWithTheKeptValueOnceAndTheLoadStillStores() throws {
        var machine = Self.machine(
            ttl: .seconds(10), failSafe: FailSafe(maximumStaleness: .seconds(60), softTimeout: .seconds(1))
        )
        Self.loaded(&machine, 1, "old")
        guard case .enqueued(let reload?, _, softTimeout: true) = Self.ask(&machine, 1, "a", at: .seconds(12)) else {
            Issue.record("a caller of a reload with a kept value gets a soft timeout"); return
        }
        let a = machine.lastWaiterID
        guard case .enqueued(nil, _, softTimeout: true) = Self.ask(&machine, 1, "b", at: .seconds(12)) else {
            Issue.record("so does one that joins it"); return
        }
        let b = machine.lastWaiterID
        guard case .enqueued(nil, _, softTimeout: false) = Self.ask(&machine, 1, "forced", force: true, at: .seconds(12)) else {
            Issue.record("a forced caller waits for its load"); return
        }
        let answered = machine.softTimeoutEnded(key: 1, id: a, now: .seconds(13))
        #expect(answered?.waiter == "a" && answered?.value == "old")
        let again = machine.softTimeoutEnded(key: 1, id: a, now: .seconds(13))
        #expect(again == nil)  // once
        #expect(machine.counters.softTimeouts == 1)
        guard case .finish(let waiters, .success("new"), _, _) = machine.attemptFinished(
            generation: reload.generation, result: .success("new"), now: .seconds(14)
        ) else { Issue.record("the load finishes"); return }
        #expect(waiters.map(\.waiter) == ["b"])  // "a" was answered already
        #expect(machine.cachedValue(for: 1, now: .seconds(14)) == "new")
        let delivered = machine.softTimeoutEnded(key: 1, id: b, now: .seconds(15))
        #expect(delivered == nil)  // delivered by the load
        // No kept value (a new key), or one past the maximum staleness: no soft timeout.
        guard case .enqueued(_, _, softTimeout: false) = Self.ask(&machine, 2, "c") else {
            Issue.record("nothing at hand for a new key"); return
        }
        Self.loaded(&machine, 3, "three")
        _ = Self.ask(&machine, 3, "d", at: .seconds(30))
        let tooOld = machine.softTimeoutEnded(key: 3, id: machine.lastWaiterID, now: .seconds(71))
        #expect(tooOld == nil)
    }

    // MARK: Expiry jitter

    /// Issue 51's synchronised expiry: 10,000 keys loaded within one second, a 60 s time to live.
    /// Without jitter they all expire in the same second; with 10 s of jitter the busiest second
    /// of reloads holds at most twice the mean of the seconds they spread over.
    @Test(arguments: [0, 10])
    func valuesLoadedTogetherExpireSpreadOverTheJitter(jitterSeconds: Int64) {
        var machine = Machine(
            configuration: .init(
                maximumEntries: 20_000, timeToLive: .seconds(60), staleWhileRevalidate: .zero, retry: .never,
                jitter: RetryJitter(SeededRandomNumberGenerator(seed: 51)), expiryJitter: .seconds(jitterSeconds)
            )
        )
        for key in 0..<10_000 {
            let now = Int64(key) * 100_000  // 10,000 loads in one second
            let load = Self.started(Self.ask(&machine, key, "w", at: now))!
            _ = machine.attemptFinished(generation: load.generation, result: .success("v"), now: now)
        }
        var perSecond: [Int64: Int] = [:]
        for bucket in machine.table.buckets.indices {
            guard let node = machine.table.buckets[bucket] else { continue }
            perSecond[node.expiresAt / 1_000_000_000, default: 0] += 1
            #expect(node.expiresAt <= Int64(node.key) * 100_000 + .seconds(60))  // never later
        }
        let busiest = perSecond.values.max()!
        let mean = 10_000 / max(1, Int(jitterSeconds))
        print("expiries per second, jitter \(jitterSeconds) s:", perSecond.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" })
        if jitterSeconds == 0 {
            #expect(perSecond.count <= 2)  // all within [60 s, 61 s)
        } else {
            #expect(busiest <= 2 * mean)
            #expect(perSecond.count >= Int(jitterSeconds))
        }
    }

    // MARK: Put and bulk invalidation

    @Test func aPutValueReplacesTheCachedOneAndALoadInFlightDoesNotOverwriteIt() throws {
        var machine = Self.machine(ttl: .seconds(10))
        Self.loaded(&machine, 1, "old")
        _ = machine.put(key: 1, value: "put", now: .seconds(1))
        #expect(Self.ask(&machine, 1, "a", at: .seconds(10)).isCached("put", refreshing: false))  // 1 s + 10 s
        // A new key: inserted as a load's result would be.
        _ = machine.put(key: 2, value: "two", now: .zero)
        #expect(machine.cachedValue(for: 2, now: .seconds(9)) == "two")
        // A put while a load runs: its waiters get its result, the entry keeps the value put.
        let load = try #require(Self.started(Self.ask(&machine, 3, "waiting")))
        _ = Self.ask(&machine, 3, "forced", force: true)
        _ = machine.put(key: 3, value: "put", now: .zero)
        #expect(Self.ask(&machine, 3, "later").isCached("put", refreshing: false))
        guard case .finish(let waiters, .success("loaded"), let next?, _) = machine.attemptFinished(
            generation: load.generation, result: .success("loaded"), now: .seconds(1)
        ) else { Issue.record("the superseded load delivers and starts the forced follow-up"); return }
        #expect(waiters.map(\.waiter) == ["waiting"])
        #expect(machine.cachedValue(for: 3, now: .seconds(1)) == "put")
        // The follow-up began after the put: its result is stored.
        _ = machine.attemptFinished(generation: next.generation, result: .success("fresh"), now: .seconds(2))
        #expect(machine.cachedValue(for: 3, now: .seconds(2)) == "fresh")
        // A superseded load's failure is not kept either.
        let failing = try #require(Self.started(Self.ask(&machine, 4, "w")))
        _ = machine.put(key: 4, value: "put", now: .zero)
        _ = Self.fail(&machine, failing, at: .zero, failureExpiresIn: .seconds(60))
        #expect(machine.failures.isEmpty && machine.cachedValue(for: 4, now: .zero) == "put")
    }

    @Test func tagsFollowTheValueTheyWereComputedForAndLeaveWithIt() throws {
        var machine = Self.machine(max: 3, ttl: .seconds(10))
        let load = try #require(Self.started(Self.ask(&machine, 1, "a")))
        _ = machine.attemptFinished(generation: load.generation, result: .success("v"), tags: ["user:1", "all"], now: .zero)
        _ = machine.put(key: 2, value: "w", tags: ["user:2", "all"], now: .zero)
        _ = machine.cacheExtra(key: 3, value: "x", tags: ["user:1"], now: .zero)
        #expect(Set(machine.keys(taggedWith: "user:1")) == [1, 3])
        #expect(Set(machine.keys(taggedWith: "all")) == [1, 2])
        _ = machine.put(key: 1, value: "untagged", now: .zero)  // a new value without tags
        #expect(machine.keys(taggedWith: "all") == [2])
        _ = machine.invalidate(2)
        _ = machine.put(key: 4, value: "y", tags: ["user:4"], now: .zero)  // evicts one of 1, 3
        #expect(machine.tagged.keys.allSatisfy { machine.table.find($0) != nil })
        _ = machine.invalidateAll()
        #expect(machine.tagged.isEmpty)
    }

    @Test func aPutEndsAKeptFailureRespectsTheBoundsAndKeepsNothingWithoutATimeToLive() throws {
        var machine = Self.machine(max: 2, ttl: .seconds(10))
        let failing = try #require(Self.started(Self.ask(&machine, 1, "a")))
        _ = Self.fail(&machine, failing, at: .zero, failureExpiresIn: .seconds(60))
        _ = machine.put(key: 1, value: "found", now: .zero)
        #expect(machine.failures.isEmpty && Self.ask(&machine, 1, "b").isCached("found", refreshing: false))
        _ = machine.put(key: 2, value: "two", now: .zero)
        let released = machine.put(key: 3, value: "three", now: .zero)
        #expect(machine.count == 2 && released.evictions == 1)
        var none = Self.machine(ttl: .zero)
        _ = none.put(key: 1, value: "v", now: .zero)
        #expect(none.count == 0)
        #expect(Set(machine.keys) == Set(machine.table.nodes.map(\.key)))
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
        #expect(waiters.map(\.waiter) == ["b"])
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
        #expect(oldWaiters.map(\.waiter) == ["old"])
        #expect(machine.cachedValue(for: 1, now: .zero) == nil)
        guard case .finish(let newWaiters, _, _, _) = machine.attemptFinished(
            generation: new.generation, result: .success("fresh"), now: .zero
        ) else { Issue.record("no finish"); return }
        #expect(newWaiters.map(\.waiter) == ["new"])
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
        // A new key at the bound evicts the oldest unread value (1).
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
        guard case .finish(let waiters, _, nil, _) = machine.attemptFinished(
            generation: refresh.generation, result: .failure(TestFailure()), now: .seconds(14)
        ) else { Issue.record("no finish"); return }
        #expect(waiters.isEmpty)
        #expect(machine.cachedValue(for: 1, now: .seconds(14)) == "v1")
        #expect(machine.cachedValue(for: 1, now: .seconds(15)) == nil)
    }

    static func refreshingMachine(_ refreshAhead: RefreshAhead, max: Int = 10, failSafe: FailSafe? = nil) -> Machine {
        Machine(
            configuration: .init(
                maximumEntries: max, timeToLive: .seconds(10), staleWhileRevalidate: .zero, retry: .never,
                failSafe: failSafe, refreshAhead: refreshAhead
            )
        )
    }

    @Test func aHitPastTheRefreshPointServesTheValueAndStartsOneRefreshThatAFailureDoesNotTurnIntoAFailSafe() {
        var machine = Self.refreshingMachine(.fraction(0.5), failSafe: FailSafe(maximumStaleness: .seconds(60)))
        let first = Self.started(Self.ask(&machine, 1, "a"))!
        _ = machine.attemptFinished(generation: first.generation, result: .success("v1"), now: .zero)
        #expect(Self.ask(&machine, 1, "b", at: .seconds(4)).isCached("v1", refreshing: false))
        guard case .deliverCached("v1", let refresh?) = Self.ask(&machine, 1, "c", at: .seconds(5)) else {
            Issue.record("no refresh at the refresh point"); return
        }
        #expect(Self.ask(&machine, 1, "d", at: .seconds(6)).isCached("v1", refreshing: false))  // one at a time
        #expect(machine.counters.hits == 3 && machine.counters.refreshesAhead == 1 && machine.counters.staleHits == 0)
        // The refresh fails before the value expires: the value stays, to expire at its time; no
        // fail-safe (nothing has expired), no kept failure.
        guard case .finish(let waiters, .failure, nil, _) = machine.attemptFinished(
            generation: refresh.generation, result: .failure(TestFailure()), now: .seconds(7)
        ) else { Issue.record("no finish"); return }
        #expect(waiters.isEmpty && machine.counters.failSafeHits == 0)
        #expect(machine.cachedValue(for: 1, now: .milliseconds(9_999)) == "v1")
        #expect(machine.cachedValue(for: 1, now: .seconds(10)) == nil)
        // The next hit in the window tries again; its success moves both points.
        guard case .deliverCached("v1", let again?) = Self.ask(&machine, 1, "e", at: .seconds(8)) else {
            Issue.record("no second refresh"); return
        }
        _ = machine.attemptFinished(generation: again.generation, result: .success("v2"), now: .seconds(9))
        #expect(Self.ask(&machine, 1, "f", at: .seconds(13)).isCached("v2", refreshing: false))
        #expect(Self.ask(&machine, 1, "g", at: .seconds(14)).isCached("v2", refreshing: true))
        #expect(machine.cachedValue(for: 1, now: .seconds(18)) == "v2" && machine.cachedValue(for: 1, now: .seconds(19)) == nil)
    }

    @Test func aRefreshAheadEndsWithItsEntryWhenInvalidatedReplacedOrEvicted() {
        var machine = Self.refreshingMachine(.age(.seconds(8)), max: 2)
        for key in 1...2 {
            let load = Self.started(Self.ask(&machine, key, "a"))!
            _ = machine.attemptFinished(generation: load.generation, result: .success("v\(key)"), now: .zero)
        }
        #expect(machine.expiries.count == 2)
        // Invalidated while its refresh runs: the refresh's result is delivered, not stored.
        guard case .deliverCached("v1", let refresh?) = Self.ask(&machine, 1, "b", at: .seconds(8)) else {
            Issue.record("no refresh"); return
        }
        _ = machine.invalidate(1)
        #expect(machine.expiries[1] == nil)
        _ = machine.attemptFinished(generation: refresh.generation, result: .success("late"), now: .seconds(8))
        #expect(machine.cachedValue(for: 1, now: .seconds(8)) == nil)
        // Replaced by a put while its refresh runs: the put's value and points win.
        guard case .deliverCached("v2", let second?) = Self.ask(&machine, 2, "c", at: .seconds(9)) else {
            Issue.record("no refresh"); return
        }
        _ = machine.put(key: 2, value: "put", now: .seconds(9))
        _ = machine.attemptFinished(generation: second.generation, result: .success("late"), now: .seconds(9))
        #expect(Self.ask(&machine, 2, "d", at: .seconds(16)).isCached("put", refreshing: false))
        #expect(machine.expiries[2] == .seconds(19))
        // A value whose own lifetime is shorter than the age expires first: no refresh point.
        _ = machine.put(key: 3, value: "short", expiresIn: .seconds(5), now: .seconds(16))
        #expect(machine.expiries[3] == nil)
        #expect(Self.ask(&machine, 3, "e", at: .seconds(20)).isCached("short", refreshing: false))
        // Evicted (key 3 took key 2's place, or key 2 took 3's): no record outlives its entry.
        #expect(machine.count <= 2 && machine.expiries.keys.allSatisfy { machine.cachedValue(for: $0, now: .seconds(16)) != nil })
    }

    /// The removals `machine` queued, as "key value cause", taken as the owner told to deliver
    /// them does (until none are left).
    static func delivered(_ machine: inout Machine) -> [String] {
        var all: [String] = []
        while let removals = machine.takeRemovals() {
            all += removals.map { "\($0.key) \($0.value) \($0.cause)" }
        }
        return all
    }

    @Test func everyCachedValueThatLeavesIsQueuedOnceWithItsCauseAndOneOwnerDeliversThem() {
        var machine = Machine(
            configuration: .init(
                maximumEntries: 2, timeToLive: .seconds(10), staleWhileRevalidate: .zero, retry: .never,
                notifiesRemovals: true
            )
        )
        for key in 1...2 {
            let load = Self.started(Self.ask(&machine, key, "a"))!
            guard case .finish(_, _, _, let released) = machine.attemptFinished(
                generation: load.generation, result: .success("v\(key)"), now: .zero
            ) else { Issue.record("no finish"); return }
            #expect(!released.notifies)  // nothing left the cache
        }
        // Replaced by a put: the first removal makes this owner the one to deliver; the second,
        // queued while it has not delivered yet, does not make another.
        #expect(machine.put(key: 1, value: "put1", now: .seconds(1)).notifies)
        #expect(!machine.put(key: 1, value: "put2", now: .seconds(1)).notifies)
        #expect(Self.delivered(&machine) == ["1 v1 replaced", "1 put1 replaced"])
        // A new key at the bound evicts key 2, the oldest in the queue (key 1 re-entered it with
        // its put).
        guard case .enqueued(_, let released, _) = Self.ask(&machine, 3, "b", at: .seconds(1)) else {
            Issue.record("no load"); return
        }
        #expect(released.notifies && released.causes.evictedForSize == 1)
        #expect(Self.delivered(&machine) == ["2 v2 evicted_size"])
        // Expired: a caller finds key 1 past its time to live; its reload drops it.
        guard case .enqueued(_, let expired, _) = Self.ask(&machine, 1, "c", at: .seconds(11)) else {
            Issue.record("no reload"); return
        }
        #expect(expired.notifies && expired.causes.expired == 1)
        #expect(Self.delivered(&machine) == ["1 put2 expired"])
        // Invalidated, with a load in flight: the entry had no value, so nothing to report.
        #expect(!machine.invalidate(1).released.notifies)
        #expect(machine.removals.isEmpty)
        #expect(machine.counters.replacements == 2 && machine.counters.evictions == 1)
        #expect(machine.counters.expirations == 1 && machine.counters.costEvictions == 0)
    }

    @Test func aCostBoundEvictsForCostAndInvalidationReportsEveryCachedValue() {
        var machine = Machine(
            configuration: .init(
                maximumEntries: 10, timeToLive: .seconds(10), staleWhileRevalidate: .zero, retry: .never, maximumCost: 5,
                notifiesRemovals: true
            )
        )
        _ = machine.put(key: 1, value: "a", cost: 3, now: .zero)
        _ = machine.put(key: 2, value: "b", cost: 3, now: .zero)  // 6 > 5: key 1 goes
        #expect(Self.delivered(&machine) == ["1 a evicted_cost"])
        #expect(machine.counters.costEvictions == 1 && machine.counters.evictions == 1)
        _ = machine.put(key: 3, value: "too costly", cost: 9, now: .zero)  // never cached: no removal
        #expect(machine.removals.isEmpty)
        _ = machine.put(key: 4, value: "d", cost: 1, now: .zero)
        let (_, released) = machine.invalidateAll()
        #expect(released.notifies && released.causes.invalidated == 2)
        #expect(Set(Self.delivered(&machine)) == ["2 b invalidated", "4 d invalidated"])
        #expect(machine.expiries.isEmpty && machine.tagged.isEmpty)
    }

    @Test func aForcedCallerDuringALoadWaitsForTheFollowUpLoad() {
        var machine = Self.machine()
        let first = Self.started(Self.ask(&machine, 1, "a"))!
        _ = Self.ask(&machine, 1, "forced", force: true)
        _ = Self.ask(&machine, 1, "plain")
        guard case .finish(let waiters, _, let next?, _) = machine.attemptFinished(
            generation: first.generation, result: .success("v1"), now: .zero
        ) else { Issue.record("no follow-up"); return }
        #expect(waiters.map(\.waiter) == ["a", "plain"])
        guard case .finish(let followers, _, nil, _) = machine.attemptFinished(
            generation: next.generation, result: .success("v2"), now: .zero
        ) else { Issue.record("no finish"); return }
        #expect(followers.map(\.waiter) == ["forced"])
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
        guard case .finish(let waiters, .failure, nil, _) = machine.attemptFinished(
            generation: load.generation, result: .failure(TestFailure()), now: .zero
        ) else { Issue.record("no final failure"); return }
        #expect(waiters.map(\.waiter) == ["a"])
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


extension Int64 {
    /// `seconds` in the machine's unit, nanoseconds (so tests read `now: .seconds(12)`).
    fileprivate static func seconds(_ seconds: Int64) -> Int64 { seconds * 1_000_000_000 }
    /// `milliseconds` in nanoseconds.
    fileprivate static func milliseconds(_ milliseconds: Int64) -> Int64 { milliseconds * 1_000_000 }
}

extension KeyedMonoTaskStateMachine.RequestAction where Value == String {
    /// Whether the caller got `value` at once, and whether that started a background refresh.
    fileprivate func isCached(_ value: String, refreshing: Bool) -> Bool {
        guard case .deliverCached(let cached, let refresh) = self else { return false }
        return cached == value && (refresh != nil) == refreshing
    }
}
