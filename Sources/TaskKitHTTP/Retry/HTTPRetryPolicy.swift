import Foundation
import TaskKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// When and after how long a failed request is sent again.
///
/// A request is retried when all of these hold:
/// - its method is in ``retryableMethods`` (the idempotent methods by default, so a `POST` is
///   never sent twice unless you opt in);
/// - it failed with a status in ``retryableStatusCodes`` (408, 429, 500, 502, 503, 504 by default)
///   or a `URLError` whose code is in ``retryableURLErrorCodes`` (transient network failures);
///   cancellation is never retried;
/// - ``retry`` allows another retry.
///
/// The delay before retry `n` comes from ``retry``'s `IntervalProxy` (exponential backoff with a
/// cap and jitter by default). When ``honoursRetryAfter`` is on and the response carries a valid
/// `Retry-After` (seconds or HTTP-date), the delay is at least that long — but never more than the
/// proxy's cap, or ``delayCeiling`` (60 s by default) when the proxy has none, so a server can
/// never park a client for longer than its configuration allows.
///
/// Install it as an interceptor of ``URLTaskManager``; its waits run on the manager's clock.
public struct HTTPRetryPolicy: Sendable {
    /// How many retries, and the backoff between them.
    public var retry: RetryCount
    /// The methods that may be retried (upper case).
    public var retryableMethods: Set<String>
    /// The statuses that trigger a retry.
    public var retryableStatusCodes: Set<Int>
    /// The `URLError` codes that trigger a retry.
    public var retryableURLErrorCodes: Set<URLError.Code>
    /// Whether a `Retry-After` header lengthens the delay (bounded by the cap).
    public var honoursRetryAfter: Bool
    /// The longest delay before a retry when ``retry``'s interval proxy has no cap of its own
    /// (for example a retry count written as an integer literal): a `Retry-After` asking for more
    /// is cut to this. A proxy's own cap takes precedence. Never negative.
    public var delayCeiling: Duration
    /// The wall clock that a `Retry-After` HTTP-date is measured against when the policy runs
    /// inside ``URLTaskManager``; `Date()` by default. Inject a fixed date in tests.
    ///
    /// HTTP-dates name a calendar time, so they need the wall clock; the wait itself still runs
    /// on the manager's `Clock`.
    public var currentDate: @Sendable () -> Date

    /// The idempotent methods of RFC 9110: GET, HEAD, OPTIONS, TRACE, PUT, DELETE.
    public static let idempotentMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]
    /// 408, 429, 500, 502, 503, 504.
    public static let defaultRetryableStatusCodes: Set<Int> = [408, 429, 500, 502, 503, 504]
    /// Timed out, cannot find or connect to the host, connection lost, DNS failure, offline.
    public static let defaultRetryableURLErrorCodes: Set<URLError.Code> = [
        .timedOut, .cannotFindHost, .cannotConnectToHost, .networkConnectionLost,
        .dnsLookupFailed, .notConnectedToInternet,
    ]
    /// 60 seconds: a longer wait is better left to the caller, who gets the response and can
    /// reschedule.
    public static let defaultDelayCeiling: Duration = .seconds(60)
    /// Three retries, exponential backoff from 0.5 s doubling, capped at 30 s, full jitter.
    public static let defaultRetry: RetryCount = .count(
        count: 3,
        intervalProxy: .exponential(
            initial: .milliseconds(500), scaleRate: 2, maximumDelay: .seconds(30), jitter: .full
        )
    )

    /// Creates a retry policy; every parameter has the documented default (`currentDate`: `Date()`).
    ///
    /// - Precondition: `delayCeiling` is not negative.
    public init(
        retry: RetryCount = HTTPRetryPolicy.defaultRetry,
        retryableMethods: Set<String> = HTTPRetryPolicy.idempotentMethods,
        retryableStatusCodes: Set<Int> = HTTPRetryPolicy.defaultRetryableStatusCodes,
        retryableURLErrorCodes: Set<URLError.Code> = HTTPRetryPolicy.defaultRetryableURLErrorCodes,
        honoursRetryAfter: Bool = true,
        delayCeiling: Duration = HTTPRetryPolicy.defaultDelayCeiling,
        currentDate: @escaping @Sendable () -> Date = { Date() }
    ) {
        _ = retry.maximumRetries  // rejects a negative count with RetryCount's message
        precondition(delayCeiling >= .zero, "HTTPRetryPolicy: delayCeiling must not be negative, got \(delayCeiling)")
        self.delayCeiling = delayCeiling
        self.retry = retry
        self.retryableMethods = Set(retryableMethods.map { $0.uppercased() })
        self.retryableStatusCodes = retryableStatusCodes
        self.retryableURLErrorCodes = retryableURLErrorCodes
        self.honoursRetryAfter = honoursRetryAfter
        self.currentDate = currentDate
    }

    /// Whether `outcome` of `request` is worth another attempt, ignoring the retry budget.
    public func isRetryable(_ request: URLRequest, outcome: Result<HTTPURLResponse, any Error>) -> Bool {
        guard retryableMethods.contains(request.method) else { return false }
        switch outcome {
        case .success(let response):
            return retryableStatusCodes.contains(response.statusCode)
        case .failure(let error as URLError):
            return error.code != .cancelled && retryableURLErrorCodes.contains(error.code)
        case .failure:
            return false
        }
    }

    /// The delay before the next attempt, or `nil` when the request must not be retried.
    ///
    /// - Parameters:
    ///   - request: The request that was sent.
    ///   - outcome: Its response or error.
    ///   - retriesMade: How many retries this request already had.
    ///   - lastDelay: The delay before the previous retry (for decorrelated jitter).
    ///   - now: The wall-clock time, for `Retry-After` dates.
    ///   - generator: The random source for jitter.
    public func delay(
        for request: URLRequest,
        outcome: Result<HTTPURLResponse, any Error>,
        retriesMade: Int,
        lastDelay: Duration? = nil,
        now: Date = Date(),
        using generator: inout some RandomNumberGenerator
    ) -> Duration? {
        guard isRetryable(request, outcome: outcome) else { return nil }
        var asked: TimeInterval?
        if honoursRetryAfter, case .success(let response) = outcome {
            asked = RetryAfter.seconds(from: response, now: now)
        }
        return retry.delay(
            forRetry: retriesMade + 1, previous: lastDelay?.timeInterval, atLeast: asked,
            ceiling: delayCeiling.timeInterval, using: &generator
        ).map(Duration.init(timeInterval:))
    }

    /// ``delay(for:outcome:retriesMade:lastDelay:now:using:)`` with the system random generator.
    public func delay(
        for request: URLRequest,
        outcome: Result<HTTPURLResponse, any Error>,
        retriesMade: Int,
        lastDelay: Duration? = nil,
        now: Date = Date()
    ) -> Duration? {
        // Not `SystemRandomNumberGenerator` itself: an `inout` access to a zero-sized local has
        // no storage of its own, and ThreadSanitizer then attributes it to whatever memory the
        // address happens to point into (here, a Swift task's allocator slab), reporting
        // "access races" between unrelated calls. A generator with one byte of state has a real
        // stack address.
        var generator = HTTPRetrySystemRandom()
        return delay(
            for: request, outcome: outcome, retriesMade: retriesMade,
            lastDelay: lastDelay, now: now, using: &generator
        )
    }
}

/// `SystemRandomNumberGenerator` with one byte of state, so that it has storage of its own.
struct HTTPRetrySystemRandom: RandomNumberGenerator {
    private var system = SystemRandomNumberGenerator()
    private var draws: UInt8 = 0

    mutating func next() -> UInt64 {
        draws &+= 1
        return system.next()
    }
}
