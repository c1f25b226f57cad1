import TaskKitTestSupport
import Testing

@testable import TaskKitHTTP

@Suite("Host concurrency: the state machine (pure)")
struct HostConcurrencyStateMachineTests {
    /// The machine with `String` waiters, behind methods an `#expect` can call (a macro's
    /// expression cannot mutate a local value).
    final class Driver {
        var machine: HostConcurrencyStateMachine<String>

        init(inFlight: Int, queued: Int) {
            machine = HostConcurrencyStateMachine(limit: HostConcurrencyLimit(maximumInFlight: inFlight, maximumQueued: queued))
        }

        /// A driver whose host `h` has its one slot taken and waiters `w1` … `w<count>` queued.
        static func busy(waiting count: Int, queued: Int) -> Driver {
            let driver = Driver(inFlight: 1, queued: queued)
            _ = driver.atOnce("h")
            for id in 1...count { _ = driver.acquire("h", UInt64(id)) }
            return driver
        }

        func atOnce(_ host: String) -> Bool { machine.acquireAtOnce(host: host) }
        func acquire(_ host: String, _ id: UInt64) -> HostConcurrencyStateMachine<String>.AcquireAction {
            machine.acquire(host: host, id: id, waiter: "w\(id)")
        }
        func release(_ host: String) -> String? { machine.release(host: host) }
        func leave(_ host: String, _ id: UInt64) -> String? { machine.leave(host: host, id: id) }
        var hosts: Int { machine.hosts.count }
    }

    @Test("attempts take free slots, then queue, then are refused; hosts do not share slots")
    func grantQueueReject() {
        let m = Driver(inFlight: 2, queued: 2)
        #expect(m.atOnce("a:80"))
        #expect(m.acquire("a:80", 1) == .granted)
        #expect(!m.atOnce("a:80"), "both slots are taken")
        #expect(m.acquire("a:80", 2) == .queued(position: 1))
        #expect(m.acquire("a:80", 3) == .queued(position: 2))
        #expect(m.acquire("a:80", 4) == .rejected)
        #expect(m.machine.waiting(for: "a:80") == 2 && m.machine.inFlight(to: "a:80") == 2)
        #expect(m.acquire("b:80", 5) == .granted, "another host has slots of its own")
        #expect(m.machine.inFlight(to: "b:80") == 1)
    }

    @Test("a released slot goes to the first waiting attempt; the last release forgets the host")
    func fifoHandOver() {
        let m = Driver.busy(waiting: 3, queued: 3)
        #expect(m.release("h") == "w1")
        #expect(m.machine.inFlight(to: "h") == 1, "the slot changed hands")
        #expect(m.release("h") == "w2")
        #expect(m.release("h") == "w3")
        #expect(m.release("h") == nil)
        #expect(m.hosts == 0, "nothing in flight or waiting: the host is forgotten")
        #expect(m.release("h") == nil, "a release of an unknown host changes nothing")
        #expect(m.hosts == 0)
    }

    @Test("a newcomer never overtakes a waiting attempt")
    func noOvertaking() {
        let m = Driver.busy(waiting: 1, queued: 2)
        // The slot is handed over on release: there is never a free slot while someone waits.
        #expect(m.release("h") == "w1")
        #expect(!m.atOnce("h"))
        #expect(m.acquire("h", 2) == .queued(position: 1))
    }

    @Test("a caller that leaves the queue (cancelled, timed out) is handed back once and never granted")
    func leaveWhileQueued() {
        let m = Driver.busy(waiting: 3, queued: 3)
        #expect(m.leave("h", 2) == "w2", "from the middle of the queue")
        #expect(m.leave("h", 2) == nil, "handed back once")
        #expect(m.machine.waiting(for: "h") == 2)
        #expect(m.release("h") == "w1")
        #expect(m.release("h") == "w3", "the one that left is skipped")
        #expect(m.release("h") == nil)
        #expect(m.hosts == 0)
    }

    @Test("a leave that loses the race with the grant finds nothing: the grantee holds the slot and releases it")
    func leaveAfterGrant() {
        let m = Driver.busy(waiting: 1, queued: 1)
        #expect(m.release("h") == "w1")
        #expect(m.leave("h", 1) == nil, "already granted: not handed back a second time")
        #expect(m.machine.inFlight(to: "h") == 1)
        #expect(m.release("h") == nil)
        #expect(m.hosts == 0)
        #expect(m.leave("h", 1) == nil, "a leave for a forgotten host changes nothing")
    }

    @Test("the last waiter leaving keeps the host while its slot is in flight; a full queue has room again")
    func leaveFreesQueueRoom() {
        let m = Driver.busy(waiting: 1, queued: 1)
        #expect(m.acquire("h", 2) == .rejected)
        #expect(m.leave("h", 1) == "w1")
        #expect(m.hosts == 1 && m.machine.inFlight(to: "h") == 1)
        #expect(m.acquire("h", 3) == .queued(position: 1))
    }

    @Test("maximumQueued 0: an attempt that finds no free slot is refused at once")
    func noQueue() {
        let m = Driver(inFlight: 1, queued: 0)
        #expect(m.acquire("h", 1) == .granted)
        #expect(m.acquire("h", 2) == .rejected)
        #expect(m.release("h") == nil)
        #expect(m.hosts == 0)
    }

    @Test("random interleavings of arrivals, completions and leaves: bounds hold, each waiter comes back exactly once", arguments: [1, 2, 3, 4, 5] as [UInt64])
    func randomInterleavings(seed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed)
        let hostNames = ["a", "b", "c"]
        let limit = HostConcurrencyLimit(maximumInFlight: 3, maximumQueued: 5)
        var m = HostConcurrencyStateMachine<UInt64>(limit: limit)
        var holding: [String: Int] = [:]  // slots held, by host
        var waiting: [String: [UInt64]] = [:]  // what the test expects to be queued, in order
        var handedBack = Set<UInt64>()
        var nextID: UInt64 = 0
        for _ in 0..<5_000 {
            let host = hostNames.randomElement(using: &random)!
            switch Int.random(in: 0..<3, using: &random) {
            case 0:
                nextID += 1
                let action = m.acquire(host: host, id: nextID, waiter: nextID)
                switch action {
                case .granted:
                    #expect(waiting[host, default: []].isEmpty && holding[host, default: 0] < limit.maximumInFlight)
                    holding[host, default: 0] += 1
                    handedBack.insert(nextID)
                case .queued(let position):
                    waiting[host, default: []].append(nextID)
                    #expect(position == waiting[host]!.count && position <= limit.maximumQueued)
                case .rejected:
                    #expect(waiting[host, default: []].count == limit.maximumQueued)
                    handedBack.insert(nextID)
                }
            case 1:
                guard holding[host, default: 0] > 0 else { continue }
                let next = m.release(host: host)
                if let first = waiting[host]?.first {
                    #expect(next == first, "first in, first out")
                    waiting[host]!.removeFirst()
                } else {
                    #expect(next == nil)
                    holding[host]! -= 1
                }
                if let next { #expect(handedBack.insert(next).inserted, "waiter \(next) handed back twice") }
            default:
                guard let queued = waiting[host], !queued.isEmpty else {
                    let stranger = m.leave(host: host, id: nextID + 1)
                    #expect(stranger == nil)
                    continue
                }
                let id = queued.randomElement(using: &random)!
                let left = m.leave(host: host, id: id)
                #expect(left == id)
                waiting[host]!.removeAll { $0 == id }
                #expect(handedBack.insert(id).inserted)
            }
            for name in hostNames {
                #expect(m.inFlight(to: name) == holding[name, default: 0])
                #expect(m.waiting(for: name) == waiting[name, default: []].count)
                #expect((m.hosts[name] != nil) == (holding[name, default: 0] > 0), "a host is kept exactly while it has slots in flight")
            }
        }
    }
}
