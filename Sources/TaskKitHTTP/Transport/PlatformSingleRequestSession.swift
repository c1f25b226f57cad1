// Linux only: the one-request sessions of `URLSessionTransport` for requests libcurl would
// re-send on a pooled connection (see `goesOutOnItsOwnConnection(_:)`), in one place
// (.ci/check-platform-conditionals allows platform conditionals only in such files).
import Foundation
import TaskKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(FoundationNetworking)
extension URLSessionTransport {
    /// Sends `request`, and each redirect it gets, through a session of its own that reuses no
    /// connection, so that the session cannot send any of them twice.
    func sendOnItsOwnConnections(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let configuration = Self.cancellationSafe(session.configuration)
        var current = request
        for _ in 0...Self.maximumRedirects {
            let delegate = SingleRequestDelegate()
            let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
            defer { session.finishTasksAndInvalidate() }
            let (data, response) = try await delegate.send(current, through: session)
            guard let next = Self.redirect(of: current, by: response) else { return (data, response) }
            current = next
        }
        throw Self.normalized(URLError(.httpTooManyRedirects), for: current)
    }
}

/// The delegate of a session that sends one request: collects its response and body, and
/// refuses redirects (the task then completes with the redirect response).
///
/// FoundationNetworking follows every redirect of a task made with a completion handler, so a
/// request whose redirects the transport follows itself is a delegate task.
private final class SingleRequestDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private struct State {
        var continuation: CheckedContinuation<(Data, HTTPURLResponse), any Error>?
        var request: URLRequest?
        var response: URLResponse?
        var data = Data()
    }

    private let state = LockedState(State())

    /// Sends `request` through `session` (whose delegate this is) and returns its response.
    func send(_ request: URLRequest, through session: URLSession) async throws -> (Data, HTTPURLResponse) {
        let cancellation = DataTaskCancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                // Resumed once, by `didCompleteWithError`, which URLSession calls exactly once
                // per task (also when it is cancelled, started or not).
                state.withLock { state in
                    state.continuation = continuation
                    state.request = request
                }
                let task = session.dataTask(with: request)
                if cancellation.install(task) {
                    task.resume()
                } else {
                    task.cancel()
                }
            }
        } onCancel: {
            cancellation.cancel()
        }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        state.withLock { $0.response = response }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        state.withLock { $0.data.append(data) }
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (continuation, request, response, data) = state.withLock { state in
            defer { state.continuation = nil }
            return (state.continuation, state.request, state.response ?? task.response, state.data)
        }
        guard let continuation, let request else { return }
        if let error = error as? URLError {
            continuation.resume(throwing: URLSessionTransport.normalized(error, for: request))
        } else if let error {
            continuation.resume(throwing: error)
        } else if let http = response as? HTTPURLResponse {
            continuation.resume(returning: (data, http))
        } else {
            continuation.resume(throwing: URLTaskError.notHTTPResponse)
        }
    }
}
#else
extension URLSessionTransport {
    /// Not reached on Apple platforms (``goesOutOnItsOwnConnection(_:)`` is always `false`):
    /// sends through the transport's session.
    func sendOnItsOwnConnections(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        try await send(request, through: session)
    }
}
#endif
