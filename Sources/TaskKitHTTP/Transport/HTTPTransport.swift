import Dispatch
import Foundation
import TaskKit
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

/// An ``HTTPTransport`` over `URLSession`.
///
/// Cancelling the calling task cancels the underlying `URLSessionTask` (it then fails with
/// `URLError.cancelled`). Failures are reported with the codes of the failure table in *Using
/// URLTaskManager* on every platform, which are the codes Apple's `URLSession` uses for the same
/// failures (FoundationNetworking's libcurl codes are mapped to them).
///
/// **How often a request reaches the server.** A request whose method is idempotent (GET, HEAD,
/// OPTIONS, TRACE, PUT, DELETE: ``HTTPRetryPolicy/idempotentMethods``) may be sent a second
/// time by the session itself when the pooled connection it went out on dies without a reply;
/// every platform's `URLSession` does so. Any other method (`POST`, `PATCH`, …) reaches the
/// server at most once per ``send(_:)``: on Linux, where libcurl would re-send it too (body
/// rewound), it goes out on a connection of its own, in a session used for that request only,
/// and the transport follows its redirects itself, each hop on a new connection (so such
/// requests do not reuse connections there). So does, on Linux, any request with a body (a
/// `PUT`, say): FoundationNetworking's re-send of an uploaded body stalls until the request
/// times out. A connection that dies under such a request is reported as
/// `URLError(.networkConnectionLost)`.
///
/// Two limits of FoundationNetworking, the `URLSession` of Linux, that no transport over it can
/// remove:
/// - it truncates `URLRequest.timeoutInterval` to whole seconds; ``URLTaskManager`` enforces
///   its own timeouts with its clock, so sub-second timeouts belong there, not in the request;
/// - a server that closes the connection in the middle of the response headers makes it stop
///   the process (`fatalError` "Transfer completed, but there's no response"). On Linux, talk
///   to servers you do not control through `AsyncHTTPClientTransport` (the
///   `TaskKitAsyncHTTPClient` product), which reports that failure as
///   `URLError(.networkConnectionLost)`.
public final class URLSessionTransport: HTTPTransport {
    /// The session requests are sent through.
    public let session: URLSession
    private let ownsSession: Bool
    /// The most redirects the transport follows itself for a request sent on a connection of
    /// its own (the limit of Apple's `URLSession`).
    static let maximumRedirects = 16

    /// A transport over an existing session. The session is not invalidated by the transport.
    ///
    /// On Linux, a request that is not idempotent goes through a one-request session made from
    /// a copy of `session`'s configuration (see the type's documentation), so `session`'s
    /// delegate does not see it.
    ///
    /// On Linux, give the session no `URLCache` (see ``defaultConfiguration``): FoundationNetworking
    /// can trap when a request of a session with a cache is cancelled.
    public init(session: URLSession) {
        self.session = session
        self.ownsSession = false
    }

    /// A transport over a new session made from a copy of `configuration`; the session is
    /// invalidated (letting running requests finish) when the transport is released.
    ///
    /// On Linux the copy's `urlCache` is set to `nil`, whatever `configuration` says: with a
    /// cache, FoundationNetworking looks the request up on a background queue before the task is
    /// wired to its protocol, and a cancel landing in that window (a timeout, a cancelled caller)
    /// can trap in `URLSession.behaviour(for:)` ("Trying to access a behaviour for a task that in
    /// not in the registry", swift-corelibs-foundation SR-11310). ``URLTaskManager`` cancels
    /// requests as a matter of course, so it trades the cache for not crashing.
    ///
    /// - Parameter configuration: The session's configuration; ``defaultConfiguration`` if omitted.
    public init(configuration: URLSessionConfiguration = URLSessionTransport.defaultConfiguration) {
        self.session = URLSession(configuration: Self.cancellationSafe(configuration))
        self.ownsSession = true
    }

    /// A new ephemeral configuration without a `URLCache`, safe to cancel requests of on every
    /// platform. Use it for any `URLSession` of your own on Linux whose requests may be cancelled.
    public static var defaultConfiguration: URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        return configuration
    }

    /// A copy of `configuration`, without a URL cache on Linux (see ``init(configuration:)``).
    static func cancellationSafe(_ configuration: URLSessionConfiguration) -> URLSessionConfiguration {
        guard dropsURLCache else { return configuration }
        // `copy()` of a URLSessionConfiguration is always a URLSessionConfiguration.
        let copy = configuration.copy() as! URLSessionConfiguration
        copy.urlCache = nil
        return copy
    }

    deinit {
        if ownsSession { session.finishTasksAndInvalidate() }
    }

    /// Sends `request` through the session.
    ///
    /// Errors are made the same on every platform: a connection
    /// closed before the announced body arrived is `URLError(.networkConnectionLost)`, and a
    /// reply that is not HTTP is `URLError(.cannotParseResponse)`. Cancelling the calling task
    /// cancels the `URLSessionTask`, and this throws `URLError(.cancelled)`.
    ///
    /// Built on `dataTask(with:completionHandler:)`, not on `URLSession.data(for:)`: on Linux,
    /// FoundationNetworking's `data(for:)` cancels its task from inside the Swift task's
    /// cancellation handler with a `sync` onto the session's work queue, while the runtime holds
    /// the cancelled task's status lock; if the work queue is at that moment resuming the same
    /// task's continuation (which needs that lock), both wait forever. Here the cancellation
    /// handler only hands the `cancel()` to another queue, so it never blocks under the lock.
    ///
    /// - Throws: a `URLError`, or ``URLTaskError/notHTTPResponse`` when the response is not an
    ///   `HTTPURLResponse`.
    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        if Self.goesOutOnItsOwnConnection(request) {
            return try await sendOnItsOwnConnections(request)
        }
        return try await send(request, through: session)
    }

    /// Sends `request` through `session`, which follows redirects itself.
    func send(_ request: URLRequest, through session: URLSession) async throws -> (Data, HTTPURLResponse) {
        let cancellation = DataTaskCancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Data, HTTPURLResponse), any Error>) in
                // The completion handler is the only place the continuation is resumed, and
                // URLSession calls it exactly once per task (also when the task is cancelled,
                // started or not).
                let task = session.dataTask(with: request) { data, response, error in
                    if let error = error as? URLError {
                        continuation.resume(throwing: Self.normalized(error, for: request))
                        return
                    }
                    if let error {
                        continuation.resume(throwing: error)
                        return
                    }
                    guard let http = response as? HTTPURLResponse else {
                        continuation.resume(throwing: URLTaskError.notHTTPResponse)
                        return
                    }
                    continuation.resume(returning: (data ?? Data(), http))
                }
                if cancellation.install(task) {
                    task.resume()
                } else {
                    task.cancel()  // cancelled before it started: completes with URLError(.cancelled)
                }
            }
        } onCancel: {
            cancellation.cancel()
        }
    }

    /// The request `response` redirects `request` to, as `URLSession` makes it; `nil` when
    /// `response` is not a redirect to follow.
    ///
    /// `301`, `302` and `303` turn a `POST` (`303`: anything but `HEAD`) into a `GET` without a
    /// body; `307` and `308` keep the method and body. `Authorization` and `Cookie` are not sent
    /// to another origin.
    static func redirect(of request: URLRequest, by response: HTTPURLResponse) -> URLRequest? {
        guard [301, 302, 303, 307, 308].contains(response.statusCode),
            let location = response.value(forHTTPHeaderField: "Location"),
            let from = request.url,
            let to = URL(string: location, relativeTo: from)?.absoluteURL,
            let scheme = to.scheme?.lowercased(), scheme == "http" || scheme == "https"
        else { return nil }
        var next = request
        next.url = to
        let method = request.method
        if (response.statusCode == 303 && method != "HEAD") || ([301, 302].contains(response.statusCode) && method == "POST") {
            next.httpMethod = "GET"
            next.httpBody = nil
            next.setValue(nil, forHTTPHeaderField: "Content-Type")
            next.setValue(nil, forHTTPHeaderField: "Content-Length")
        }
        if from.scheme?.lowercased() != scheme || from.host?.lowercased() != to.host?.lowercased() || from.port != to.port {
            next.setValue(nil, forHTTPHeaderField: "Authorization")
            next.setValue(nil, forHTTPHeaderField: "Cookie")
        }
        return next
    }

    /// `error` with the code of the failure table in *Using URLTaskManager*, which is the code
    /// Apple's `URLSession` uses for the same failure.
    ///
    /// FoundationNetworking (Linux) reports some broken responses with the codes of the
    /// underlying libcurl failure: a connection closed without any reply is
    /// `.badServerResponse` ("Empty reply from server") or `.unknown`, a body cut short is
    /// `.unknown` ("transfer closed with N bytes remaining to read"), a reset is `.unknown`
    /// ("Recv failure: Connection reset by peer"), and a reply that is not HTTP is
    /// `.unsupportedURL` ("Received HTTP/0.9 when not allowed") even for an `http` URL. This maps
    /// them to `.networkConnectionLost` (the first three) and `.cannotParseResponse`, so that
    /// callers and ``HTTPRetryPolicy`` see one vocabulary. The session's error is kept as the new
    /// error's underlying error (`NSUnderlyingErrorKey`); every other error keeps its code and
    /// gains the request's URL as its `failingURL` if it had none.
    ///
    /// - Parameters:
    ///   - error: The session's error.
    ///   - request: The request that failed (only `http` and `https` requests are remapped).
    static func normalized(_ error: URLError, for request: URLRequest) -> URLError {
        guard let scheme = request.url?.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            return error
        }
        let text = error.localizedDescription.lowercased()
        let code: URLError.Code
        switch error.code {
        case .unknown where text.contains("transfer closed with") || text.contains("empty reply from server")
            || text.contains("recv failure") || text.contains("connection reset"):
            code = .networkConnectionLost
        case .badServerResponse where text.contains("empty reply from server"):
            code = .networkConnectionLost
        case .unknown where text.contains("weird server reply") || text.contains("http/0.9"):
            code = .cannotParseResponse
        case .unsupportedURL where text.contains("http/0.9"):
            code = .cannotParseResponse
        default:
            guard error.failingURL == nil, let url = request.url else { return error }
            // Same error, naming the URL (FoundationNetworking leaves it out of timeouts).
            var userInfo = error.userInfo
            userInfo[NSURLErrorFailingURLErrorKey] = url
            return URLError(error.code, userInfo: userInfo)
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

/// The `URLSessionDataTask` of one ``URLSessionTransport/send(_:)``, and whether the calling task
/// was cancelled, shared between the send and its cancellation handler.
final class DataTaskCancellation: Sendable {
    private let state = LockedState<(task: URLSessionDataTask?, cancelled: Bool)>((nil, false))

    /// Records the task; `false` if the send was cancelled already (the task must not start).
    func install(_ task: URLSessionDataTask) -> Bool {
        state.withLock { state in
            if state.cancelled { return false }
            state.task = task
            return true
        }
    }

    /// Cancels the installed task, if any, on another queue: this runs inside the Swift task's
    /// cancellation handler, under the runtime's lock of that task, and `URLSessionTask.cancel()`
    /// waits for the session's work queue, which may itself be waiting for that lock.
    func cancel() {
        let task = state.withLock { state -> URLSessionDataTask? in
            state.cancelled = true
            return state.task
        }
        guard let task else { return }
        Self.queue.async { task.cancel() }
    }

    /// Where cancels run: a queue of TaskKit's own, not `DispatchQueue.global()`, whose threads
    /// are as many as the cores; when the host's own blocking work fills them (a `MonoTask` on
    /// its default queue, a semaphore wait), a cancel given to it waits behind that work, and the
    /// request goes on until its answer. A queue created here gets a thread of its own when the
    /// shared ones are all busy.
    private static let queue = DispatchQueue(label: "TaskKit.URLSessionTransport.cancel", attributes: .concurrent)
}
