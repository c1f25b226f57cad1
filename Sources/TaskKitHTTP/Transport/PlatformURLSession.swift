// What differs between Apple's URLSession and FoundationNetworking's, in one place
// (.ci/check-platform-conditionals allows platform conditionals only in such files).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLSessionTransport {
    /// Whether ``init(configuration:)`` gives its session no `URLCache`: FoundationNetworking
    /// (Linux) can trap when a request of a session with a cache is cancelled.
    #if canImport(FoundationNetworking)
    static let dropsURLCache = true
    #else
    static let dropsURLCache = false
    #endif

    /// Whether the platform's `URLSession` reports a connection closed in the middle of the
    /// response headers as an error. FoundationNetworking (Linux) stops the process instead
    /// (`fatalError` "Transfer completed, but there's no response"); Apple's reports an error.
    #if canImport(FoundationNetworking)
    static let survivesCloseMidHeaders = false
    #else
    static let survivesCloseMidHeaders = true
    #endif

    /// Whether ``send(_:)`` sends `request` (and its redirects) through a one-request session
    /// instead of the shared one: on Linux, a request whose method is not idempotent or that
    /// has a body, since libcurl, under FoundationNetworking, re-sends a request of any method
    /// when the pooled connection it went out on closes without a reply (a `POST` twice, body
    /// rewound; an uploaded body stalls until the request times out). Never on Apple platforms,
    /// whose `URLSession` re-sends only idempotent requests.
    #if canImport(FoundationNetworking)
    static func goesOutOnItsOwnConnection(_ request: URLRequest) -> Bool {
        !request.hasIdempotentMethod
            || request.httpBody != nil || request.httpBodyStream != nil
    }
    #else
    static func goesOutOnItsOwnConnection(_ request: URLRequest) -> Bool { false }
    #endif
}
