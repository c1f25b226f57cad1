import Foundation
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP

@Suite("Request coalescing: the state machine and the key (pure)")
struct RequestCoalescingStateMachineTests {
    typealias Machine = RequestCoalescingStateMachine<String, String>

    @Test("the first caller starts a flight, later ones join it, all get its outcome")
    func startAndJoin() {
        var m = Machine()
        guard case .start(let flight) = m.join(key: "k", id: 1, waiter: "a") else { Issue.record("expected start"); return }
        guard case .joined(flight) = m.join(key: "k", id: 2, waiter: "b") else { Issue.record("expected joined"); return }
        guard case .start(let other) = m.join(key: "other", id: 3, waiter: "c") else { Issue.record("expected start"); return }
        #expect(other != flight)
        let (waiters, next) = m.finish(key: "k", flight: flight)
        #expect(waiters == ["a", "b"])
        #expect(next == nil)
        #expect(m.flights["k"] == nil && m.flights["other"] != nil)
        // Nothing is cached: the next caller starts a new flight.
        guard case .start(let again) = m.join(key: "k", id: 4, waiter: "d") else { Issue.record("expected start"); return }
        #expect(again != flight)
    }

    @Test("a caller that leaves is handed back; the last one abandons the flight")
    func leaveAndAbandon() {
        var m = Machine()
        guard case .start(let flight) = m.join(key: "k", id: 1, waiter: "a") else { Issue.record("expected start"); return }
        _ = m.join(key: "k", id: 2, waiter: "b")
        #expect(m.leave(key: "k", id: 1) == ("a", nil), "the first caller leaving does not end the flight")
        #expect(m.leave(key: "k", id: 1) == (nil, nil))
        #expect(m.leave(key: "k", id: 2) == ("b", flight), "the last caller leaving abandons it")
        #expect(m.flights["k"]?.abandoned == true, "only the flight removes its entry")
    }

    @Test("a caller never joins an abandoned flight: it queues, and starts the next flight when the old one ends")
    func queueBehindAbandonedFlight() {
        var m = Machine()
        guard case .start(let first) = m.join(key: "k", id: 1, waiter: "a") else { Issue.record("expected start"); return }
        _ = m.leave(key: "k", id: 1)
        guard case .queued = m.join(key: "k", id: 2, waiter: "b") else { Issue.record("expected queued"); return }
        guard case .queued = m.join(key: "k", id: 3, waiter: "c") else { Issue.record("expected queued"); return }
        #expect(m.leave(key: "k", id: 3) == ("c", nil), "a queued caller can leave")
        let (waiters, next) = m.finish(key: "k", flight: first)
        #expect(waiters.isEmpty, "the abandoned flight has nobody to answer")
        guard let started = next else { Issue.record("expected a next flight"); return }
        #expect(started.starter == "b")
        #expect(started.flight != first)
        // The next flight is live: a new caller joins it.
        guard case .joined(started.flight) = m.join(key: "k", id: 4, waiter: "d") else { Issue.record("expected joined"); return }
        #expect(m.finish(key: "k", flight: started.flight).waiters == ["b", "d"])
    }

    @Test("a late end of an old flight changes nothing")
    func oldFlightEndIsIgnored() {
        var m = Machine()
        guard case .start(let first) = m.join(key: "k", id: 1, waiter: "a") else { Issue.record("expected start"); return }
        _ = m.finish(key: "k", flight: first)
        guard case .start(let second) = m.join(key: "k", id: 2, waiter: "b") else { Issue.record("expected start"); return }
        #expect(m.finish(key: "k", flight: first).waiters.isEmpty)
        #expect(m.flights["k"]?.id == second)
    }

    func request(_ url: String, method: String = "GET", headers: [String: String] = [:], body: String? = nil) -> URLRequest {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = body.map { Data($0.utf8) }
        return request
    }

    @Test("eligible: GET and HEAD; other methods only with an Idempotency-Key, whose value and body join the key")
    func eligibility() {
        let coalescing = URLTaskCoalescing()
        #expect(coalescing.flightKey(for: request("http://a.test/x")) != nil)
        #expect(coalescing.flightKey(for: request("http://a.test/x", method: "HEAD")) != nil)
        #expect(coalescing.flightKey(for: request("http://a.test/x", method: "POST")) == nil)
        #expect(coalescing.flightKey(for: request("http://a.test/x", method: "PUT")) == nil)
        let pay = request("http://a.test/pay", method: "POST", headers: ["Idempotency-Key": "k1"], body: "{1}")
        #expect(coalescing.flightKey(for: pay) != nil)
        #expect(coalescing.flightKey(for: pay) == coalescing.flightKey(for: pay))
        #expect(coalescing.flightKey(for: pay) != coalescing.flightKey(for: request("http://a.test/pay", method: "POST", headers: ["Idempotency-Key": "k2"], body: "{1}")))
        #expect(coalescing.flightKey(for: pay) != coalescing.flightKey(for: request("http://a.test/pay", method: "POST", headers: ["Idempotency-Key": "k1"], body: "{2}")))
        // Never joined: a range, or a cache directive that asks for a fresh answer.
        #expect(coalescing.flightKey(for: request("http://a.test/x", headers: ["Range": "bytes=0-9"])) == nil)
        #expect(coalescing.flightKey(for: request("http://a.test/x", headers: ["Cache-Control": "no-cache"])) == nil)
        #expect(coalescing.flightKey(for: request("http://a.test/x", headers: ["Cache-Control": "max-age=0, no-store"])) == nil)
        #expect(URLTaskCoalescing(methods: ["get"]).flightKey(for: request("http://a.test/x")) != nil)
    }

    @Test("the URL's normal form: scheme and host lowercased, default port and fragment dropped, / for an empty path")
    func normalisedURL() {
        let expected = [
            "http://a.test/x": "http://a.test/x",
            "http://a.test:8080/x?b=1": "http://a.test:8080/x?b=1",
            "HTTP://A.Test:80/X?Q=1#top": "http://a.test/X?Q=1",
            "https://a.test:443/x": "https://a.test/x",
            "http://a.test:443/x": "http://a.test:443/x",
            "http://a.test": "http://a.test/",
            "http://a.test?q=1": "http://a.test/?q=1",
            "http://U:P@A.test/x": "http://U:P@a.test/x",
            "http://[::1]:80/x": "http://[::1]/x",
            "http://a.test/%41?Q=%42": "http://a.test/%41?Q=%42",
        ]
        for (text, normal) in expected {
            #expect(URLTaskCoalescing.normalised(URL(string: text)!) == normal, "\(text)")
        }
    }

    @Test("the key: normalised URL, credentials, negotiation and conditional headers, named extras, or the user's own")
    func key() {
        let coalescing = URLTaskCoalescing(additionalKeyHeaders: ["X-Tenant"])
        func key(_ request: URLRequest) -> RequestFlightKey? { coalescing.flightKey(for: request) }
        #expect(key(request("HTTP://A.test:80/x#top")) == key(request("http://a.test/x")))
        #expect(key(request("https://a.test:443")) == key(request("https://a.test/")))
        #expect(key(request("http://a.test/x?b=1")) != key(request("http://a.test/x?b=2")))
        #expect(key(request("http://a.test/x", method: "HEAD")) != key(request("http://a.test/x")))
        for header in ["Authorization", "Cookie", "Accept", "Accept-Encoding", "Accept-Language", "If-None-Match", "X-Tenant"] {
            #expect(key(request("http://a.test/x", headers: [header: "1"])) != key(request("http://a.test/x", headers: [header: "2"])), "\(header)")
        }
        #expect(key(request("http://a.test/x", headers: ["authorization": "Bearer t"])) == key(request("http://a.test/x", headers: ["Authorization": "Bearer t"])))
        #expect(key(request("http://a.test/x", headers: ["X-Trace": "1"])) == key(request("http://a.test/x", headers: ["X-Trace": "2"])))
        let own = URLTaskCoalescing(key: { $0.url?.path == "/skip" ? nil : $0.url?.lastPathComponent })
        #expect(own.flightKey(for: request("http://a.test/a/x")) == own.flightKey(for: request("http://b.test/b/x")))
        #expect(own.flightKey(for: request("http://a.test/skip")) == nil)
        #expect(own.flightKey(for: request("http://a.test/x", headers: ["Range": "bytes=0-1"])) == nil)
    }
}
