import Foundation
import TaskKit
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP

/// A generator that always returns the same value, so jitter is predictable.
struct FixedGenerator: RandomNumberGenerator {
    var value: UInt64
    mutating func next() -> UInt64 { value }
}

func makeResponse(status: Int, headers: [String: String] = [:], url: String = "http://127.0.0.1/x") -> HTTPURLResponse {
    HTTPURLResponse(url: URL(string: url)!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
}

func makeRequest(_ method: String = "GET", url: String = "http://127.0.0.1/x") -> URLRequest {
    var request = URLRequest(url: URL(string: url)!)
    request.httpMethod = method
    return request
}

@Suite("HTTPRetryPolicy (pure)")
struct HTTPRetryPolicyTests {
    let noJitter = HTTPRetryPolicy(
        retry: .count(count: 3, intervalProxy: .exponential(initial: .seconds(1), scaleRate: 2, maximumDelay: .seconds(3)))
    )

    @Test("idempotent methods are retried, POST and PATCH are not by default")
    func idempotentMethodsOnly() {
        let policy = HTTPRetryPolicy()
        for method in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE", "get"] {
            #expect(policy.isRetryable(makeRequest(method), outcome: .success(makeResponse(status: 503))), "\(method)")
        }
        for method in ["POST", "PATCH", "CONNECT"] {
            #expect(!policy.isRetryable(makeRequest(method), outcome: .success(makeResponse(status: 503))), "\(method)")
        }
        let optedIn = HTTPRetryPolicy(retryableMethods: ["post"])
        #expect(optedIn.isRetryable(makeRequest("POST"), outcome: .success(makeResponse(status: 503))))
    }

    @Test("408, 429, 500, 502, 503, 504 are retried; other statuses are not")
    func retryableStatuses() {
        let policy = HTTPRetryPolicy()
        for status in [408, 429, 500, 502, 503, 504] {
            #expect(policy.isRetryable(makeRequest(), outcome: .success(makeResponse(status: status))), "\(status)")
        }
        for status in [200, 201, 204, 301, 304, 400, 401, 403, 404, 409, 422, 501, 505] {
            #expect(!policy.isRetryable(makeRequest(), outcome: .success(makeResponse(status: status))), "\(status)")
        }
    }

    @Test("transient URLErrors are retried; cancellation and permanent errors are not")
    func urlErrors() {
        let policy = HTTPRetryPolicy()
        for code: URLError.Code in [.timedOut, .cannotConnectToHost, .networkConnectionLost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet] {
            #expect(policy.isRetryable(makeRequest(), outcome: .failure(URLError(code))), "\(code)")
        }
        for code: URLError.Code in [.cancelled, .badURL, .unsupportedURL, .badServerResponse, .userAuthenticationRequired] {
            #expect(!policy.isRetryable(makeRequest(), outcome: .failure(URLError(code))), "\(code)")
        }
        #expect(!policy.isRetryable(makeRequest(), outcome: .failure(CancellationError())))
        #expect(!policy.isRetryable(makeRequest(), outcome: .failure(URLTaskError.notHTTPResponse)))
    }

    @Test("exponential backoff, capped, and the retry budget")
    func backoffAndBudget() {
        var generator = FixedGenerator(value: 0)
        let outcome: Result<HTTPURLResponse, any Error> = .success(makeResponse(status: 503))
        let delays = (0..<4).map {
            noJitter.delay(for: makeRequest(), outcome: outcome, retriesMade: $0, using: &generator)
        }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(3), nil])
    }

    @Test("full jitter stays within 0...computed delay")
    func jitter() {
        let policy = HTTPRetryPolicy(
            retry: .count(count: 5, intervalProxy: .exponential(initial: .seconds(1), maximumDelay: .seconds(10), jitter: .full))
        )
        for _ in 0..<200 {
            let delay = policy.delay(for: makeRequest(), outcome: .success(makeResponse(status: 500)), retriesMade: 2)
            #expect(delay != nil)
            #expect(delay! >= .zero && delay! <= .seconds(4))
        }
    }

    @Test("Retry-After in seconds lengthens the delay, bounded by the cap")
    func retryAfterSeconds() {
        var generator = FixedGenerator(value: 0)
        let short = makeResponse(status: 429, headers: ["Retry-After": "2"])
        #expect(noJitter.delay(for: makeRequest(), outcome: .success(short), retriesMade: 0, using: &generator) == .seconds(2))
        let long = makeResponse(status: 429, headers: ["Retry-After": "3600"])
        #expect(noJitter.delay(for: makeRequest(), outcome: .success(long), retriesMade: 0, using: &generator) == .seconds(3))
        // A Retry-After shorter than the backoff does not shorten it.
        let tiny = makeResponse(status: 503, headers: ["Retry-After": "0"])
        #expect(noJitter.delay(for: makeRequest(), outcome: .success(tiny), retriesMade: 1, using: &generator) == .seconds(2))
        // Ignored when the policy says so.
        var ignoring = noJitter
        ignoring.honoursRetryAfter = false
        #expect(ignoring.delay(for: makeRequest(), outcome: .success(short), retriesMade: 0, using: &generator) == .seconds(1))
    }

    @Test("without a cap in the retry count, Retry-After is bounded by delayCeiling (60 s by default)")
    func retryAfterWithoutCapIsBoundedByTheCeiling() {
        let day = makeResponse(status: 429, headers: ["Retry-After": "86400"])
        let literal = HTTPRetryPolicy(retry: 3)  // no interval proxy cap
        #expect(literal.delay(for: makeRequest(), outcome: .success(day), retriesMade: 0) == .seconds(60))
        let short = makeResponse(status: 429, headers: ["Retry-After": "5"])
        #expect(literal.delay(for: makeRequest(), outcome: .success(short), retriesMade: 0) == .seconds(5))
        let tight = HTTPRetryPolicy(retry: 3, delayCeiling: .seconds(2))
        #expect(tight.delay(for: makeRequest(), outcome: .success(day), retriesMade: 0) == .seconds(2))
        // A cap of the retry's own proxy takes precedence over the ceiling.
        let capped = HTTPRetryPolicy(
            retry: .count(count: 3, intervalProxy: .fixed(.seconds(1)).capped(at: .seconds(300))), delayCeiling: .seconds(2)
        )
        #expect(capped.delay(for: makeRequest(), outcome: .success(day), retriesMade: 0) == .seconds(300))
        #expect(HTTPRetryPolicy().delayCeiling == HTTPRetryPolicy.defaultDelayCeiling)
    }

    @Test("Retry-After as an HTTP-date is measured against now")
    func retryAfterDate() {
        var generator = FixedGenerator(value: 0)
        let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT
        let response = makeResponse(status: 503, headers: ["Retry-After": "Sun, 06 Nov 1994 08:49:39 GMT"])
        let delay = noJitter.delay(for: makeRequest(), outcome: .success(response), retriesMade: 0, now: now, using: &generator)
        #expect(delay == .seconds(2))
    }

    @Test("never retries with RetryCount.never")
    func never() {
        let policy = HTTPRetryPolicy(retry: .never)
        #expect(policy.delay(for: makeRequest(), outcome: .success(makeResponse(status: 503)), retriesMade: 0) == nil)
    }

    @Test("a negative retry count is rejected naming the value")
    func negativeCountRejected() async {
        await #expect(processExitsWith: .failure) {
            _ = HTTPRetryPolicy(retry: .count(count: -1))
        }
    }
}

@Suite("RetryAfter parsing")
struct RetryAfterTests {
    let now = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT

    @Test("delta seconds")
    func seconds() {
        #expect(RetryAfter.delay(from: "0", now: now) == .zero)
        #expect(RetryAfter.delay(from: "120", now: now) == .seconds(120))
        #expect(RetryAfter.delay(from: " 7 ", now: now) == .seconds(7))
        // Beyond any Duration: saturates rather than failing or trapping.
        #expect(RetryAfter.delay(from: String(repeating: "9", count: 40), now: now)! > .seconds(1_000_000_000_000))
    }

    @Test("the three HTTP-date forms")
    func dates() {
        #expect(RetryAfter.delay(from: "Sun, 06 Nov 1994 08:49:47 GMT", now: now) == .seconds(10))
        #expect(RetryAfter.delay(from: "Sunday, 06-Nov-94 08:49:47 GMT", now: now) == .seconds(10))
        #expect(RetryAfter.delay(from: "Sun Nov  6 08:49:47 1994", now: now) == .seconds(10))
    }

    @Test("a date in the past means now")
    func pastDate() {
        #expect(RetryAfter.delay(from: "Sun, 06 Nov 1994 08:00:00 GMT", now: now) == .zero)
    }

    @Test("invalid values are ignored")
    func invalid() {
        for value in ["", "-5", "1.5", "soon", "Sun, 99 Nov 1994 08:49:37 GMT", "0x10"] {
            #expect(RetryAfter.delay(from: value, now: now) == nil, "\(value)")
        }
    }
}
