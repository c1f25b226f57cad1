/// The rules of ``HostRateLimit``, as a pure value type (no lock, no task, no clock: time is a
/// `Duration` since an origin the owner chooses).
///
/// The bucket is kept as the generic cell rate algorithm keeps it: one instant per host, `tat`
/// (the theoretical arrival time), instead of a token count and a refill time. An attempt
/// arriving at `now` moves `tat` to `max(tat, now) + interval` and may go out at
/// `tat - burst × interval` (or at once when that has passed), which gives at most
/// `burst + t / interval` attempts in any interval of length `t`.
///
/// Rules:
/// - An attempt gets a ticket that says when it goes out; attempts are served in the order they
///   reserved. One whose ticket would come later than `maximumWait` from now is refused, and
///   changes nothing.
/// - A pause (a `Retry-After`) until `until` moves every ticket not yet used, and the bucket, by
///   how much the pause extends the host's current one; the bucket restarts empty (the first
///   attempt after it goes out at `until`, then one per interval). A pause shorter than the
///   current one changes nothing. Pauses are cut to `maximumPause`.
/// - A waiting attempt asks ``proceed(_:now:)`` when its time comes: a pause since it reserved
///   makes it wait longer.
/// - A waiting attempt that leaves gives its token back only when no attempt reserved after it
///   (tokens reserved later are not moved forward: never more than the rate).
/// - A host whose bucket is full (its `tat` has passed) and that is not paused is the same as a
///   host never seen; such hosts are forgotten when the table has doubled since it was last
///   swept.
struct HostRateLimitStateMachine {
    struct Host: Equatable {
        /// Tells this host's entry from one made after it was forgotten.
        var serial: UInt64
        var tat: Duration
        var pausedUntil: Duration = .zero
        /// The sum of the pauses that moved this host's tickets.
        var shift: Duration = .zero
    }

    /// An attempt's place: when it goes out and what it needs to notice a later pause.
    struct Ticket: Equatable {
        let host: String
        let serial: UInt64
        /// The host's `tat` just after this ticket was reserved.
        let tat: Duration
        /// The host's `shift` when `sendAt` was last computed.
        var shift: Duration
        /// When the attempt may go out.
        var sendAt: Duration
    }

    enum Reservation: Equatable {
        /// The attempt goes out now.
        case now
        /// The attempt waits until `ticket.sendAt`, then asks ``proceed(_:now:)``.
        case wait(Ticket)
        /// No token within `maximumWait`: the attempt fails; the next token is `retryIn` away.
        case rejected(retryIn: Duration)
    }

    let limit: HostRateLimit
    private let interval: Duration
    private(set) var hosts: [String: Host] = [:]
    private var nextSerial: UInt64 = 0
    private var sweepAt = 64

    init(limit: HostRateLimit) {
        self.limit = limit
        self.interval = limit.interval
    }

    /// An attempt to `host` arrives at `now` and asks for a token.
    mutating func reserve(host: String, now: Duration) -> Reservation {
        var entry = hosts[host] ?? newHost(now: now)
        let tat = max(entry.tat, now) + interval
        let sendAt = tat - interval * limit.burst
        if sendAt <= now {
            entry.tat = tat
            hosts[host] = entry
            return .now
        }
        let wait = sendAt - now
        guard wait <= limit.maximumWait else { return .rejected(retryIn: wait) }
        entry.tat = tat
        hosts[host] = entry
        return .wait(Ticket(host: host, serial: entry.serial, tat: tat, shift: entry.shift, sendAt: sendAt))
    }

    /// A waiting attempt's time came (`now` ≥ its `sendAt`): `nil` when it goes out, or how much
    /// longer it waits because a pause moved its ticket (it then asks again).
    mutating func proceed(_ ticket: inout Ticket, now: Duration) -> Duration? {
        if let entry = hosts[ticket.host] {
            if entry.serial == ticket.serial {
                ticket.sendAt += entry.shift - ticket.shift
                ticket.shift = entry.shift
            }
            // A ticket whose time had come before the pause began (its attempt had not yet
            // asked), or one whose host was forgotten and made again, still waits for the pause.
            ticket.sendAt = max(ticket.sendAt, entry.pausedUntil)
        }
        return ticket.sendAt > now ? ticket.sendAt - now : nil
    }

    /// A waiting attempt leaves before its time: its token goes back when it was the last one
    /// reserved (and no pause moved the bucket since).
    mutating func cancel(_ ticket: Ticket) {
        guard let entry = hosts[ticket.host], entry.serial == ticket.serial, entry.shift == ticket.shift,
            entry.tat == ticket.tat
        else { return }
        hosts[ticket.host]!.tat -= interval
    }

    /// `host` asked, at `now`, for a pause of `delay`: the end of the host's pause when this one
    /// extended it, `nil` when it changed nothing.
    mutating func pause(host: String, for delay: Duration, now: Duration) -> Duration? {
        let delay = min(delay, limit.maximumPause)
        guard delay > .zero else { return nil }
        var entry = hosts[host] ?? newHost(now: now)
        let until = now + delay
        let from = max(entry.pausedUntil, now)
        guard until > from else { return nil }
        let extension_ = until - from
        entry.shift += extension_
        entry.tat = max(entry.tat + extension_, until + interval * (limit.burst - 1))
        entry.pausedUntil = until
        hosts[host] = entry
        return until
    }

    /// Whether `host` is paused at `now`.
    func isPaused(_ host: String, now: Duration) -> Bool { (hosts[host]?.pausedUntil ?? .zero) > now }

    private mutating func newHost(now: Duration) -> Host {
        if hosts.count >= sweepAt {
            hosts = hosts.filter { $0.value.tat > now || $0.value.pausedUntil > now }
            sweepAt = max(64, hosts.count * 2)
        }
        nextSerial += 1
        return Host(serial: nextSerial, tat: now)
    }
}
