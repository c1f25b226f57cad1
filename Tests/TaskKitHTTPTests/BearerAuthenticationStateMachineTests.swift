import Testing

@testable import TaskKitHTTP

@Suite("Bearer authentication state machine (pure)")
struct BearerAuthenticationStateMachineTests {
    typealias Machine = BearerAuthenticationStateMachine<String>

    func machine(
        initial: BearerCredential? = BearerCredential(accessToken: "a", expiresIn: .seconds(100)),
        leeway: Duration = .seconds(10), limit: Int = 5, window: Duration = .seconds(30)
    ) -> Machine {
        Machine(initial: initial, now: .zero, leeway: leeway, maximumRefreshes: limit, window: window)
    }

    @Test("a fresh credential is used at once, without waiting")
    func freshCredential() {
        var m = machine()
        #expect(m.usableCredential(now: .seconds(1))?.credential.accessToken == "a")
        guard case .use(let issued) = m.credential(id: 1, waiter: "w1", now: .seconds(1)) else {
            Issue.record("expected use"); return
        }
        #expect(issued.generation == 1)
        #expect(m.waiters.isEmpty)
    }

    @Test("no credential: the first request starts the refresh, later ones wait for it")
    func noCredentialStartsOneRefresh() {
        var m = machine(initial: nil)
        guard case .startRefresh(let current) = m.credential(id: 1, waiter: "w1", now: .zero) else {
            Issue.record("expected startRefresh"); return
        }
        #expect(current == nil)
        for id in 2...50 {
            guard case .wait = m.credential(id: UInt64(id), waiter: "w\(id)", now: .zero) else {
                Issue.record("expected wait"); return
            }
        }
        let (issued, waiters) = m.refreshSucceeded(BearerCredential(accessToken: "b"), now: .seconds(1))
        #expect(issued.credential.accessToken == "b")
        #expect(waiters.count == 50)
        #expect(waiters.first == "w1" && waiters.last == "w50")
        #expect(!m.isRefreshing && m.waiters.isEmpty)
    }

    @Test("proactive refresh when the credential expires within the leeway")
    func proactiveRefresh() {
        var m = machine()
        #expect(m.usableCredential(now: .seconds(89)) != nil)
        #expect(m.usableCredential(now: .seconds(90)) == nil)
        guard case .startRefresh(let current) = m.credential(id: 1, waiter: "w", now: .seconds(90)) else {
            Issue.record("expected startRefresh"); return
        }
        #expect(current?.accessToken == "a")
    }

    @Test("a credential without expiry is used until a 401")
    func noExpiry() {
        let m = machine(initial: BearerCredential(accessToken: "a"))
        #expect(m.usableCredential(now: .seconds(1_000_000)) != nil)
    }

    @Test("401 with the current token refreshes; 401s during the refresh wait")
    func unauthorizedRefreshesOnce() {
        var m = machine()
        guard case .startRefresh = m.unauthorized(signedWith: "a", id: 1, waiter: "w1", now: .seconds(1)) else {
            Issue.record("expected startRefresh"); return
        }
        guard case .wait = m.unauthorized(signedWith: "a", id: 2, waiter: "w2", now: .seconds(1)) else {
            Issue.record("expected wait"); return
        }
        // A new request arriving during the refresh waits too.
        #expect(m.usableCredential(now: .seconds(1)) == nil)
        guard case .wait = m.credential(id: 3, waiter: "w3", now: .seconds(1)) else {
            Issue.record("expected wait"); return
        }
        let (issued, waiters) = m.refreshSucceeded(BearerCredential(accessToken: "b", expiresIn: .seconds(100)), now: .seconds(2))
        #expect(issued.generation == 2)
        #expect(waiters == ["w1", "w2", "w3"])
    }

    @Test("a request signed with an older token is replayed with the new one, without a refresh")
    func olderTokenReplayedWithoutRefresh() {
        var m = machine()
        _ = m.unauthorized(signedWith: "a", id: 1, waiter: "w1", now: .seconds(1))
        _ = m.refreshSucceeded(BearerCredential(accessToken: "b", expiresIn: .seconds(100)), now: .seconds(2))
        guard case .use(let issued) = m.unauthorized(signedWith: "a", id: 2, waiter: "late", now: .seconds(3)) else {
            Issue.record("expected use"); return
        }
        #expect(issued.credential.accessToken == "b")
        #expect(m.refreshStarts.count == 1)
        #expect(!m.isRefreshing)
    }

    @Test("an unsigned request that got 401 uses an existing credential without refreshing")
    func unsignedUsesExisting() {
        var m = machine()
        guard case .use = m.unauthorized(signedWith: nil, id: 1, waiter: "w", now: .seconds(1)) else {
            Issue.record("expected use"); return
        }
    }

    @Test("refresh failure fails every waiter and keeps the old credential")
    func refreshFailure() {
        var m = machine()
        _ = m.unauthorized(signedWith: "a", id: 1, waiter: "w1", now: .seconds(1))
        _ = m.credential(id: 2, waiter: "w2", now: .seconds(1))
        let failed = m.refreshFailed()
        #expect(failed == ["w1", "w2"])
        #expect(m.issued?.credential.accessToken == "a")
        #expect(!m.isRefreshing)
        // The next 401 may try again.
        guard case .startRefresh = m.unauthorized(signedWith: "a", id: 3, waiter: "w3", now: .seconds(2)) else {
            Issue.record("expected startRefresh"); return
        }
    }

    @Test("more than five refreshes within 30 s is a refresh loop")
    func refreshLoopGuard() {
        var m = machine()
        var token = "a"
        for second in 0..<5 {
            guard case .startRefresh = m.unauthorized(signedWith: token, id: 1, waiter: "w", now: .seconds(second)) else {
                Issue.record("expected startRefresh #\(second + 1)"); return
            }
            token = m.refreshSucceeded(BearerCredential(accessToken: "t\(second)"), now: .seconds(second)).0.credential.accessToken
        }
        guard case .fail(.refreshLoopDetected(let limit, let window)) =
            m.unauthorized(signedWith: token, id: 2, waiter: "w", now: .seconds(6))
        else {
            Issue.record("expected refreshLoopDetected"); return
        }
        #expect(limit == 5 && window == .seconds(30))
        #expect(m.waiters.isEmpty && !m.isRefreshing)
        // Once the window has moved past the first refreshes, refreshing is allowed again.
        guard case .startRefresh = m.unauthorized(signedWith: token, id: 3, waiter: "w", now: .seconds(31)) else {
            Issue.record("expected startRefresh after the window"); return
        }
    }

    @Test("a cancelled waiter is removed; the refresh continues for the others")
    func cancelWaiter() {
        var m = machine(initial: nil)
        _ = m.credential(id: 1, waiter: "w1", now: .zero)
        _ = m.credential(id: 2, waiter: "w2", now: .zero)
        #expect(m.cancel(id: 1) == "w1")
        #expect(m.cancel(id: 1) == nil)
        #expect(m.isRefreshing)
        #expect(m.refreshSucceeded(BearerCredential(accessToken: "b"), now: .zero).1 == ["w2"])
        #expect(m.cancel(id: 2) == nil)
    }

    @Test("a negative lifetime is rejected naming the value")
    func negativeLifetime() async {
        await #expect(processExitsWith: .failure) {
            _ = BearerCredential(accessToken: "x", expiresIn: .seconds(-1))
        }
    }
}
