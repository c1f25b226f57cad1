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
        let method = (request.httpMethod ?? "GET").uppercased()
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
    /// `/` for an empty path.
    static func normalised(_ url: URL) -> String {
        let string = url.absoluteString
        return isNormalised(string) ? string : parsedAndNormalised(url)  // most URLs need no parsing
    }

    /// ``normalised(_:)`` through `URLComponents`.
    static func parsedAndNormalised(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url.absoluteString }
        components.scheme = components.scheme?.lowercased()
        components.host = components.host?.lowercased()
        if (components.scheme == "http" && components.port == 80) || (components.scheme == "https" && components.port == 443) {
            components.port = nil
        }
        if components.percentEncodedPath.isEmpty { components.percentEncodedPath = "/" }
        components.fragment = nil
        return components.string ?? url.absoluteString
    }

    /// Whether `url` (an absolute URL's text) is certainly its own normal form: `scheme://`, an
    /// authority and a path starting with `/`, no upper-case letter before the path, no port
    /// `80` or `443`, no fragment. `false` whenever in doubt.
    static func isNormalised(_ url: String) -> Bool {
        let bytes = Array(url.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes.count > colon + 3,
            bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/"),
            let pathStart = bytes[(colon + 3)...].firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }),
            bytes[pathStart] == UInt8(ascii: "/"),
            !bytes.contains(UInt8(ascii: "#")),
            !bytes[..<pathStart].contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") })
        else { return false }
        let authority = bytes[(colon + 3)..<pathStart]
        return !authority.isEmpty && !authority.reversed().starts(with: Array(":80".utf8.reversed()))
            && !authority.reversed().starts(with: Array(":443".utf8.reversed()))
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
