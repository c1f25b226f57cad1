import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Which requests of a ``URLTaskManager`` share one round trip while identical ones are in
/// flight: its `coalescing:` parameter.
///
/// A request is *eligible* when:
/// - its method is in ``methods`` (`GET` and `HEAD` by default), or it carries an
///   `Idempotency-Key` header (the caller's statement that sending it once serves every caller
///   with that key; the key and the body are then part of the flight's key);
/// - it has no `Range` header and no `Cache-Control: no-cache` or `no-store`;
/// - ``key``, when given, returns a key for it.
///
/// Two eligible requests share a flight when their keys are equal: by default the method, the
/// normalised URL (scheme and host lowercased, default port and fragment dropped, an empty path
/// as `/`), the values of ``keyHeaders`` (credentials, cookies, content negotiation and
/// conditional headers) and, for a request opted in by `Idempotency-Key`, its body. The key is
/// taken from the request as the caller passes it, *before* the manager's interceptors adapt it:
/// every caller of one manager goes through the same interceptors, so two callers whose requests
/// the manager's authenticator signs with the same token share a flight, and the flight's
/// retries, `Retry-After` waits and token refresh run once for all of them. A caller that set
/// its own `Authorization` header never shares with one that set another.
public struct URLTaskCoalescing: Sendable {
    /// The methods whose requests are eligible. Default: `GET` and `HEAD`.
    public var methods: Set<String>
    /// The request headers whose values are part of the key (names compared without case).
    public var keyHeaders: Set<String>
    /// A key of your own for a request (`nil`: the request is not coalesced); `nil` for the
    /// default key. Requests with `Range` or `Cache-Control: no-cache`/`no-store` are never
    /// coalesced, whatever it says.
    public var key: (@Sendable (URLRequest) -> String?)?

    /// The headers that can change a response: `Authorization`, `Cookie`, `Accept`,
    /// `Accept-Encoding`, `Accept-Language`, the conditional headers (`If-None-Match`,
    /// `If-Modified-Since`, `If-Match`, `If-Unmodified-Since`) and `Idempotency-Key`.
    public static let defaultKeyHeaders: Set<String> = [
        "authorization", "cookie", "accept", "accept-encoding", "accept-language",
        "if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "idempotency-key",
    ]

    /// Creates a coalescing configuration.
    ///
    /// - Parameters:
    ///   - methods: The eligible methods (upper case). Default: `GET`, `HEAD`.
    ///   - additionalKeyHeaders: Headers to add to ``defaultKeyHeaders`` (a tenant header, an
    ///     API version).
    ///   - key: A key of your own; see ``key``.
    public init(
        methods: Set<String> = ["GET", "HEAD"],
        additionalKeyHeaders: Set<String> = [],
        key: (@Sendable (URLRequest) -> String?)? = nil
    ) {
        self.methods = Set(methods.map { $0.uppercased() })
        self.keyHeaders = Self.defaultKeyHeaders.union(additionalKeyHeaders.map { $0.lowercased() })
        self.key = key
    }

    /// The default: `GET` and `HEAD`, keyed by ``defaultKeyHeaders``.
    public static var standard: URLTaskCoalescing { URLTaskCoalescing() }

    /// The flight key of `request`; `nil` when it is not eligible.
    func flightKey(for request: URLRequest) -> RequestFlightKey? {
        if request.value(forHTTPHeaderField: "Range") != nil { return nil }
        if let cacheControl = request.value(forHTTPHeaderField: "Cache-Control")?.lowercased(),
            cacheControl.contains("no-cache") || cacheControl.contains("no-store")
        {
            return nil
        }
        let method = request.method
        let optedIn = request.value(forHTTPHeaderField: "Idempotency-Key") != nil
        guard methods.contains(method) || optedIn else { return nil }
        if let key {
            return key(request).map { RequestFlightKey(custom: $0) }
        }
        guard let url = request.url else { return nil }
        let headers = (request.allHTTPHeaderFields ?? [:])
            .compactMap { name, value in keyHeaders.contains(name.lowercased()) ? "\(name.lowercased()): \(value)" : nil }
            .sorted()
        return RequestFlightKey(
            method: method, url: Self.normalised(url), headers: headers,
            body: methods.contains(method) ? nil : request.httpBody
        )
    }

    /// `url` with its scheme and host lowercased, without its default port or fragment, and
    /// `/` for an empty path; the user info, path and query as they are. Works on the URL's text
    /// (no parsing beyond finding the authority), which costs a key a fraction of a microsecond.
    static func normalised(_ url: URL) -> String {
        let text = url.absoluteString
        guard let separator = text.range(of: "://") else { return text }
        let scheme = text[..<separator.lowerBound].lowercased()
        let rest = text[separator.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        var hostAndPort = rest[..<authorityEnd]
        var userInfo = Substring()
        if let at = hostAndPort.lastIndex(of: "@") {
            userInfo = hostAndPort[...at]
            hostAndPort = hostAndPort[hostAndPort.index(after: at)...]
        }
        var host = hostAndPort.lowercased()
        if scheme == "http", host.hasSuffix(":80") { host.removeLast(3) }
        if scheme == "https", host.hasSuffix(":443") { host.removeLast(4) }
        var tail = rest[authorityEnd...]
        if let fragment = tail.firstIndex(of: "#") { tail = tail[..<fragment] }
        return scheme + "://" + userInfo + host + (tail.first == "/" ? "" : "/") + tail
    }
}

/// What makes two requests the same flight: compared in full (no hash stands for it).
struct RequestFlightKey: Hashable, Sendable {
    var method = ""
    var url = ""
    var headers: [String] = []
    var body: Data?
    var custom: String?

    init(method: String, url: String, headers: [String], body: Data?) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    init(custom: String) {
        self.custom = custom
    }
}
