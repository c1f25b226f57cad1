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
    public static let survivesCloseMidHeaders = false
    #else
    public static let survivesCloseMidHeaders = true
    #endif

    /// Whether the platform's `URLSession` re-sends a request of any method (`POST` included,
    /// body rewound) when the pooled connection it went out on closes without a reply: libcurl,
    /// under FoundationNetworking (Linux), does; Apple's re-sends only idempotent requests.
    #if canImport(FoundationNetworking)
    static let reusedConnectionsResendAnyMethod = true
    #else
    static let reusedConnectionsResendAnyMethod = false
    #endif
}
