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
}
