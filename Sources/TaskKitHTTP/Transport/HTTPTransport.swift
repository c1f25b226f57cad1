import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Something that sends one HTTP request and returns the response: the seam between
/// ``URLTaskManager`` and the network.
///
/// ``URLSessionTransport`` is the standard implementation (`URLSession`, FoundationNetworking on
/// Linux). Another client (for example an in-memory fake, or a client built on swift-nio) can be
/// plugged into ``URLTaskManager`` by conforming to this protocol.
///
/// A conforming type must:
/// - return any HTTP status (4xx and 5xx included) as a response, not as an error;
/// - throw when no HTTP response is available (connection refused, bad response, …),
///   preferably a `URLError`;
/// - stop promptly and throw when the calling task is cancelled.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the body and the response.
    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse)
}

/// An ``HTTPTransport`` over `URLSession`'s async `data(for:)`.
///
/// Cancelling the calling task cancels the underlying `URLSessionTask` (it then fails with
/// `URLError.cancelled`). Note that FoundationNetworking on Linux truncates
/// `URLRequest.timeoutInterval` to whole seconds; ``URLTaskManager`` enforces its own timeouts
/// with its clock, so sub-second timeouts belong there, not in the request.
public final class URLSessionTransport: HTTPTransport {
    /// The session requests are sent through.
    public let session: URLSession
    private let ownsSession: Bool

    /// A transport over an existing session. The session is not invalidated by the transport.
    public init(session: URLSession) {
        self.session = session
        self.ownsSession = false
    }

    /// A transport over a new session made from `configuration` (ephemeral by default); the
    /// session is invalidated (letting running requests finish) when the transport is released.
    public init(configuration: URLSessionConfiguration = .ephemeral) {
        self.session = URLSession(configuration: configuration)
        self.ownsSession = true
    }

    deinit {
        if ownsSession { session.finishTasksAndInvalidate() }
    }

    /// Sends `request` through the session.
    ///
    /// Errors are made the same on every platform (see ``normalized(_:for:)``): a connection
    /// closed before the announced body arrived is `URLError(.networkConnectionLost)`, and a
    /// reply that is not HTTP is `URLError(.cannotParseResponse)`.
    ///
    /// - Throws: a `URLError`, or ``URLTaskError/notHTTPResponse`` when the response is not an
    ///   `HTTPURLResponse`.
    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch let error as URLError {
            throw Self.normalized(error, for: request)
        }
        guard let http = response as? HTTPURLResponse else { throw URLTaskError.notHTTPResponse }
        return (data, http)
    }

    /// `error` with the code Apple platforms use for the same failure.
    ///
    /// FoundationNetworking (Linux) reports some broken responses with the codes of the
    /// underlying libcurl failure rather than the ones Apple's `URLSession` uses: a body cut
    /// short is `.unknown` ("transfer closed with N bytes remaining to read"), a reply that is not
    /// HTTP is `.unsupportedURL` ("Received HTTP/0.9 when not allowed") even for an `http` URL,
    /// and a connection closed without any reply is `.unknown` too. This maps them to
    /// `.networkConnectionLost`, `.cannotParseResponse` and `.networkConnectionLost`, so that
    /// callers and ``HTTPRetryPolicy`` see one vocabulary. The original error is kept as the new
    /// error's underlying error (`NSUnderlyingErrorKey`); every other error is returned unchanged.
    ///
    /// - Parameters:
    ///   - error: The session's error.
    ///   - request: The request that failed (only `http` and `https` requests are remapped).
    public static func normalized(_ error: URLError, for request: URLRequest) -> URLError {
        guard let scheme = request.url?.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            return error
        }
        let text = error.localizedDescription.lowercased()
        let code: URLError.Code
        switch error.code {
        case .unknown where text.contains("transfer closed with") || text.contains("empty reply from server")
            || text.contains("recv failure") || text.contains("connection reset"):
            code = .networkConnectionLost
        case .unknown where text.contains("weird server reply") || text.contains("http/0.9"):
            code = .cannotParseResponse
        case .unsupportedURL where text.contains("http/0.9"):
            code = .cannotParseResponse
        default:
            return error
        }
        var userInfo: [String: Any] = [
            NSUnderlyingErrorKey: error as NSError,
            NSLocalizedDescriptionKey: error.localizedDescription,
        ]
        if let url = request.url {
            userInfo[NSURLErrorFailingURLErrorKey] = url
        }
        return URLError(code, userInfo: userInfo)
    }
}
