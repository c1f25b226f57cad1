import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Errors raised by ``URLTaskManager`` itself (transport errors such as `URLError` pass through
/// unchanged; authentication errors are ``AuthenticationError``; TaskManager's own outcomes —
/// cancelled, timed out, discarded — are `TaskError`).
public enum URLTaskError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The request's URL is missing or its scheme is not `http` or `https`; nothing was sent.
    case unsupportedURL(URL?)
    /// The transport returned a response that is not an `HTTPURLResponse`.
    case notHTTPResponse
    /// With a ``HostConcurrencyLimit``: every slot of `host` (its host and port, as
    /// `"api.example.com:443"`) was taken and `maximumQueued` attempts already waited for one;
    /// this attempt was not sent.
    case hostQueueFull(host: String, maximumQueued: Int)
    /// With a ``CircuitBreakerPolicy``: the circuit of `host` is open (or half-open with its
    /// probes under way); it is tried again in `retryIn` (zero while probing). This attempt was
    /// not sent.
    case circuitOpen(host: String, retryIn: Duration)
    /// With a ``HostRateLimit``: no token of `host`'s bucket would come within the limit's
    /// `maximumWait` (the host is busy, or paused by a `Retry-After`); the next token is
    /// `retryIn` away. This attempt was not sent.
    case rateLimited(host: String, retryIn: Duration)

    /// A sentence naming the case and what went wrong.
    public var description: String {
        switch self {
        case .unsupportedURL(let url):
            return "URLTaskError.unsupportedURL: only http and https URLs can be sent, got \(url?.absoluteString ?? "no URL")"
        case .notHTTPResponse:
            return "URLTaskError.notHTTPResponse: the transport returned a response that is not HTTP"
        case .circuitOpen(let host, let retryIn):
            return "URLTaskError.circuitOpen: the circuit of \(host) is open and is tried again in \(retryIn); nothing was sent"
        case .rateLimited(let host, let retryIn):
            return "URLTaskError.rateLimited: no token of \(host)'s rate limit comes within its maximumWait (the next in \(retryIn)); nothing was sent"
        case .hostQueueFull(let host, let maximumQueued):
            return "URLTaskError.hostQueueFull: every slot of \(host) is taken and \(maximumQueued) requests already wait; nothing was sent"
        }
    }
}
