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
        guard case .startRefresh(let current, _) = m.credential(id: 1, waiter: "w1", now: .zero) else {
            Issue.record("expected startRefresh"); return
        }
        #expect(current == nil)
        for id in 2...50 {
            guard case .wait = m.credential(id: UInt64(id), waiter: "w\(id)", now: .zero) else {
                Issue.record("expected wait"); return
            }
        }
        let (issued, waiters) = m.refreshSucceeded(BearerCredential(accessToken: "b"), refresh: m.refreshing!, now: .seconds(1))!
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
        guard case .startRefresh(let current, _) = m.credential(id: 1, waiter: "w", now: .seconds(90)) else {
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
        let (issued, waiters) = m.refreshSucceeded(BearerCredential(accessToken: "b", expiresIn: .seconds(100)), refresh: m.refreshing!, now: .seconds(2))!
        #expect(issued.generation == 2)
        #expect(waiters == ["w1", "w2", "w3"])
    }

    @Test("a request signed with an older token is replayed with the new one, without a refresh")
    func olderTokenReplayedWithoutRefresh() {
        var m = machine()
        _ = m.unauthorized(signedWith: "a", id: 1, waiter: "w1", now: .seconds(1))
        _ = m.refreshSucceeded(BearerCredential(accessToken: "b", expiresIn: .seconds(100)), refresh: m.refreshing!, now: .seconds(2))
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
        let failed = m.refreshFailed(refresh: m.refreshing!)
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
            token = m.refreshSucceeded(BearerCredential(accessToken: "t\(second)"), refresh: m.refreshing!, now: .seconds(second))!.0.credential.accessToken
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
        #expect(m.cancel(id: 1) == ("w1", nil))
        #expect(m.cancel(id: 1) == (nil, nil))
        #expect(m.isRefreshing)
        #expect(m.refreshSucceeded(BearerCredential(accessToken: "b"), refresh: m.refreshing!, now: .zero)?.1 == ["w2"])
        #expect(m.cancel(id: 2) == (nil, nil))
    }

    @Test("a token that lives less than the leeway is used for the first half of its life")
    func shortLivedToken() {
        var m = machine(initial: BearerCredential(accessToken: "a", expiresIn: .seconds(20)), leeway: .seconds(30))
        #expect(m.usableCredential(now: .zero)?.credential.accessToken == "a")
        #expect(m.usableCredential(now: .milliseconds(9_999)) != nil)
        #expect(m.usableCredential(now: .seconds(10)) == nil)
        // A refreshed short-lived token gets the same rule from the moment it arrives.
        guard case .startRefresh = m.credential(id: 1, waiter: "w", now: .seconds(10)) else {
            Issue.record("expected startRefresh"); return
        }
        _ = m.refreshSucceeded(BearerCredential(accessToken: "b", expiresIn: .seconds(20)), refresh: m.refreshing!, now: .seconds(11))
        #expect(m.usableCredential(now: .seconds(20))?.credential.accessToken == "b")
        #expect(m.usableCredential(now: .seconds(21)) == nil)
        // A long-lived token keeps the full leeway.
        let long = machine(initial: BearerCredential(accessToken: "c", expiresIn: .seconds(3600)), leeway: .seconds(30))
        #expect(long.usableCredential(now: .seconds(3569)) != nil)
        #expect(long.usableCredential(now: .seconds(3570)) == nil)
    }

    @Test("the last waiter leaving abandons the refresh; its late result changes nothing")
    func lastWaiterAbandonsRefresh() {
        var m = machine(initial: nil)
        guard case .startRefresh(_, let first) = m.credential(id: 1, waiter: "w1", now: .zero) else {
            Issue.record("expected startRefresh"); return
        }
        _ = m.credential(id: 2, waiter: "w2", now: .zero)
        #expect(m.cancel(id: 1) == ("w1", nil), "another waiter remains: the refresh goes on")
        #expect(m.cancel(id: 2) == ("w2", first), "the last waiter left: the refresh is abandoned")
        #expect(!m.isRefreshing && m.waiters.isEmpty)
        // The next request starts a new refresh, with a new id.
        guard case .startRefresh(_, let second) = m.credential(id: 3, waiter: "w3", now: .seconds(1)) else {
            Issue.record("expected a new startRefresh"); return
        }
        #expect(second != first)
        // The abandoned refresh's late results neither end the new one nor store a credential.
        #expect(m.refreshSucceeded(BearerCredential(accessToken: "late"), refresh: first, now: .seconds(2)) == nil)
        #expect(m.refreshFailed(refresh: first) == nil)
        #expect(m.isRefreshing && m.issued == nil && m.waiters.count == 1)
        #expect(m.refreshSucceeded(BearerCredential(accessToken: "b"), refresh: second, now: .seconds(2))?.1 == ["w3"])
        #expect(m.issued?.credential.accessToken == "b")
    }

    @Test("a negative lifetime is rejected naming the value")
    func negativeLifetime() async {
        await #expect(processExitsWith: .failure) {
            _ = BearerCredential(accessToken: "x", expiresIn: .seconds(-1))
        }
    }
}
