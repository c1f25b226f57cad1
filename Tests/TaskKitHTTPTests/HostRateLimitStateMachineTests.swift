import TaskKitTestSupport
import Testing

@testable import TaskKitHTTP

@Suite("Host rate limit: the state machine (pure)")
struct HostRateLimitStateMachineTests {
    typealias Machine = HostRateLimitStateMachine

    /// Milliseconds as a `Duration`, to keep the expectations short.
    static func ms(_ value: Int) -> Duration { .milliseconds(value) }

    /// Ten tokens a second (one each 100 ms), a bucket of three.
    static func machine(maximumWait: Duration = .seconds(30), maximumPause: Duration = .seconds(60)) -> Machine {
        Machine(limit: HostRateLimit(requestsPerSecond: 10, burst: 3, maximumWait: maximumWait, maximumPause: maximumPause))
    }

    static func sendAt(_ reservation: Machine.Reservation) -> Duration? {
        switch reservation {
        case .now: nil
        case .wait(let ticket): ticket.sendAt
        case .rejected: nil
        }
    }

    @Test("a full bucket lets `burst` attempts through at once, then one per interval, in arrival order")
    func burstThenPace() {
        var machine = Self.machine()
        let start = Self.ms(1_000)
        for _ in 0..<3 { #expect(machine.reserve(host: "h", now: start) == .now) }
        let waits = (0..<3).map { _ in Self.sendAt(machine.reserve(host: "h", now: start)) }
        #expect(waits == [Self.ms(1_100), Self.ms(1_200), Self.ms(1_300)])
        // Another host has its own bucket.
        #expect(machine.reserve(host: "other", now: start) == .now)
        // Quiet for a while, the bucket is full again: three at once.
        for _ in 0..<3 { #expect(machine.reserve(host: "h", now: Self.ms(2_000)) == .now) }
        #expect(Self.sendAt(machine.reserve(host: "h", now: Self.ms(2_000))) == Self.ms(2_100))
    }

    @Test("an attempt whose token is further than maximumWait is refused, says when the next token comes, and changes nothing")
    func maximumWait() {
        var machine = Self.machine(maximumWait: Self.ms(250))
        for _ in 0..<3 { _ = machine.reserve(host: "h", now: .zero) }
        #expect(Self.sendAt(machine.reserve(host: "h", now: .zero)) == Self.ms(100))
        #expect(Self.sendAt(machine.reserve(host: "h", now: .zero)) == Self.ms(200))
        #expect(machine.reserve(host: "h", now: .zero) == .rejected(retryIn: Self.ms(300)))
        #expect(machine.reserve(host: "h", now: .zero) == .rejected(retryIn: Self.ms(300)))
        #expect(Self.sendAt(machine.reserve(host: "h", now: Self.ms(100))) == Self.ms(300))
    }

    @Test("a waiting attempt that leaves gives its token back only when nobody reserved after it")
    func cancellation() throws {
        var machine = Self.machine()
        for _ in 0..<3 { _ = machine.reserve(host: "h", now: .zero) }
        guard case .wait(let first) = machine.reserve(host: "h", now: .zero),
            case .wait(let second) = machine.reserve(host: "h", now: .zero)
        else {
            Issue.record("expected two waiting tickets")
            return
        }
        // The first leaves: the second was reserved after it, so its token is lost (moving the
        // later ticket forward is not possible, and reusing the slot would exceed the rate).
        machine.cancel(first)
        #expect(Self.sendAt(machine.reserve(host: "h", now: .zero)) == Self.ms(300))
        // The newest leaves: its token goes back, the next newcomer takes its place.
        guard case .wait(let third) = machine.reserve(host: "h", now: .zero) else {
            Issue.record("expected a waiting ticket")
            return
        }
        #expect(third.sendAt == Self.ms(400))
        machine.cancel(third)
        #expect(Self.sendAt(machine.reserve(host: "h", now: .zero)) == Self.ms(400))
        _ = second
    }

    @Test("a pause holds every waiting ticket and every newcomer until it ends, and the bucket restarts empty")
    func pause() {
        var machine = Self.machine()
        for _ in 0..<3 { _ = machine.reserve(host: "h", now: .zero) }
        guard case .wait(var waiting) = machine.reserve(host: "h", now: .zero) else {
            Issue.record("expected a waiting ticket")
            return
        }
        #expect(waiting.sendAt == Self.ms(100))
        // At 50 ms the host asks for 2 s: the ticket due at 100 ms is moved by 2 s.
        #expect(machine.pause(host: "h", for: .seconds(2), now: Self.ms(50)) == Self.ms(2_050))
        #expect(machine.isPaused("h", now: Self.ms(2_049)) && !machine.isPaused("h", now: Self.ms(2_050)))
        #expect(machine.proceed(&waiting, now: Self.ms(100)) == Self.ms(2_000))
        #expect(machine.proceed(&waiting, now: Self.ms(2_100)) == nil)
        // A newcomer waits for the pause, behind the moved ticket, one interval apart.
        #expect(Self.sendAt(machine.reserve(host: "h", now: Self.ms(60))) == Self.ms(2_200))
        // A shorter pause changes nothing; a longer one extends it by the difference.
        #expect(machine.pause(host: "h", for: .seconds(1), now: Self.ms(100)) == nil)
        #expect(machine.pause(host: "h", for: .seconds(3), now: Self.ms(50)) == Self.ms(3_050))
        #expect(Self.sendAt(machine.reserve(host: "h", now: Self.ms(60))) == Self.ms(3_300))

        // An idle host paused for 1 s: no burst when the pause ends, one token at its end.
        var idle = Self.machine()
        #expect(idle.pause(host: "h", for: .seconds(1), now: .zero) == .seconds(1))
        #expect(Self.sendAt(idle.reserve(host: "h", now: .zero)) == .seconds(1))
        #expect(Self.sendAt(idle.reserve(host: "h", now: .zero)) == Self.ms(1_100))
    }

    @Test("a pause is cut to maximumPause, and a zero maximumPause ignores Retry-After")
    func pauseBounds() {
        var machine = Self.machine(maximumPause: .seconds(5))
        #expect(machine.pause(host: "h", for: .seconds(3_600), now: .zero) == .seconds(5))
        var none = Self.machine(maximumPause: .zero)
        #expect(none.pause(host: "h", for: .seconds(2), now: .zero) == nil)
        #expect(none.reserve(host: "h", now: .zero) == .now)
    }

    @Test("a ticket whose time came before a pause began, or whose host was forgotten and made again, waits for the pause")
    func lateTicket() {
        var machine = Self.machine()
        for _ in 0..<3 { _ = machine.reserve(host: "h", now: .zero) }
        guard case .wait(var late) = machine.reserve(host: "h", now: .zero) else {
            Issue.record("expected a waiting ticket")
            return
        }
        // Due at 100 ms; its task runs late, at 150 ms, after a pause that began at 120 ms.
        _ = machine.pause(host: "h", for: .seconds(1), now: Self.ms(120))
        #expect(machine.proceed(&late, now: Self.ms(150)) == Self.ms(970))
    }

    @Test("hosts with a full bucket and no pause are forgotten once the table has doubled")
    func forgetting() {
        var machine = Self.machine()
        _ = machine.pause(host: "paused", for: .seconds(60), now: .zero)
        // The 65th host finds 64 busy ones (nothing to forget); the next sweep is at 128.
        for index in 0..<127 { _ = machine.reserve(host: "h\(index)", now: .zero) }
        #expect(machine.hosts.count == 128)
        // Ten seconds later every bucket is full again: a new host sweeps all but the paused one.
        _ = machine.reserve(host: "new", now: .seconds(10))
        #expect(Set(machine.hosts.keys) == ["paused", "new"])
    }

    @Test("random arrivals, cancellations and pauses: never more than burst + rate × t in any interval t, nothing sent during a pause, every attempt sent, refused or left", arguments: 0..<20)
    func randomInterleavings(seed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed &+ 1)
        let interval = Self.ms(20)
        let burst = 4
        var machine = Machine(
            limit: HostRateLimit(requestsPerSecond: 50, burst: burst, maximumWait: Self.ms(500), maximumPause: Self.ms(400))
        )
        var waiting: [Machine.Ticket] = []
        var sends: [Duration] = []
        var pauses: [(from: Duration, until: Duration)] = []
        var arrivals = 0
        var refused = 0
        var left = 0
        for step in 0..<5_000 {
            let now = Self.ms(step)
            // Tickets whose time has come ask first (as their sleeping tasks would).
            var still: [Machine.Ticket] = []
            for var ticket in waiting {
                if ticket.sendAt <= now, machine.proceed(&ticket, now: now) == nil {
                    sends.append(ticket.sendAt)
                } else {
                    still.append(ticket)
                }
            }
            waiting = still
            if Int.random(in: 0..<1_000, using: &random) < 2, let until = machine.pause(
                host: "h", for: Self.ms(Int.random(in: 0...600, using: &random)), now: now
            ) {
                pauses.append((now, until))
            }
            if !waiting.isEmpty, Int.random(in: 0..<100, using: &random) < 2 {
                machine.cancel(waiting.remove(at: Int.random(in: 0..<waiting.count, using: &random)))
                left += 1
            }
            if Int.random(in: 0..<100, using: &random) < 8 {
                arrivals += 1
                switch machine.reserve(host: "h", now: now) {
                case .now: sends.append(now)
                case .wait(let ticket): waiting.append(ticket)
                case .rejected: refused += 1
                }
            }
        }
        #expect(arrivals == sends.count + refused + left + waiting.count)
        #expect(refused > 0 && left > 0 && !pauses.isEmpty, "the run exercised every rule")
        sends.sort()
        var worst = 0.0
        for i in sends.indices {
            for j in i..<sends.count {
                let allowed = Double(burst) + (sends[j] - sends[i]) / interval + 1e-9
                worst = max(worst, Double(j - i + 1) - allowed)
            }
        }
        #expect(worst <= 0, "some interval held \(worst) attempts too many")
        let inPause = sends.filter { send in pauses.contains { send > $0.from && send < $0.until } }
        #expect(inPause.isEmpty, "sent during a pause: \(inPause)")
    }
}
