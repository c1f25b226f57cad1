import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLRequest {
    /// The request's method in upper case, `GET` when it has none (as `URLSession` sends it).
    package var method: String { (httpMethod ?? "GET").uppercased() }

    /// Whether ``method`` is idempotent (``HTTPRetryPolicy/idempotentMethods``): sending the
    /// request twice has the effect of sending it once.
    package var hasIdempotentMethod: Bool { HTTPRetryPolicy.idempotentMethods.contains(method) }
}
