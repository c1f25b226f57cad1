#if AsyncHTTPClient
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import TaskKitHTTP
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An `HTTPTransport` over swift-server's AsyncHTTPClient, for `URLTaskManager` on a server.
///
/// ```swift
/// let client = HTTPClient(
///     eventLoopGroup: HTTPClient.defaultEventLoopGroup,
///     configuration: AsyncHTTPClientTransport.recommendedConfiguration
/// )
/// let manager = URLTaskManager(
///     transport: AsyncHTTPClientTransport(client: client),
///     interceptors: [authenticator, HTTPRetryPolicy()]
/// )
/// // … serve requests …
/// try await client.shutdown()   // whoever creates a client shuts it down
/// ```
///
/// The transport never creates or shuts down a client: it uses the one it is given
/// (`HTTPClient.shared` by default), and the client's lifetime stays with whoever created it.
///
/// It behaves as `URLSessionTransport` does, so that `URLTaskManager`, the bearer
/// authenticator and `HTTPRetryPolicy` work unchanged:
/// - every HTTP status is a response, not an error;
/// - failures are thrown as the `URLError` codes of the failure table in *Using URLTaskManager*
///   (a connection closed or reset before the response was complete is
///   `.networkConnectionLost`, a reply that is not HTTP `.cannotParseResponse`, a refused
///   connection `.cannotConnectToHost`, an expired `URLRequest.timeoutInterval` `.timedOut`),
///   with the client's own error as the `URLError`'s underlying error (`NSUnderlyingErrorKey`);
/// - cancelling the calling task cancels the request and throws `URLError(.cancelled)`;
/// - a request with an idempotent method (`HTTPRetryPolicy.idempotentMethods`: GET, HEAD,
///   OPTIONS, TRACE, PUT, DELETE) that meets a pooled connection the server had just closed
///   (`ChannelError.ioOnClosedChannel`) is sent once more, as `URLSession` does. Any other
///   method (`POST`, `PATCH`, …) is never sent again by the transport: it fails with
///   `URLError(.networkConnectionLost)`. The error does not tell which hop of a redirect chain
///   met the closed connection (AsyncHTTPClient follows redirects itself), and sending again
///   would repeat every hop from the first.
///
/// `URLRequest.timeoutInterval` bounds the whole exchange, response head and body. The body is
/// collected into memory, at most ``maximumBodySize`` bytes; a longer one fails with
/// `URLError(.dataLengthExceedsMaximum)`.
public final class AsyncHTTPClientTransport: HTTPTransport {
    /// The client requests are sent through.
    public let client: HTTPClient
    /// The largest response body accepted, in bytes.
    public let maximumBodySize: Int

    /// The default ``maximumBodySize``: 16 MiB.
    public static let defaultMaximumBodySize = 16 * 1024 * 1024

    /// A client configuration whose failures match `URLSession`'s: a refused connection fails at
    /// once (`connectionPool.retryConnectionEstablishment` off; AsyncHTTPClient otherwise retries
    /// it until the connect timeout) and redirects are followed. A transport cannot change the
    /// configuration of the client it is given, so create your client with this one (or set
    /// the same options on yours).
    public static var recommendedConfiguration: HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.retryConnectionEstablishment = false
        return configuration
    }

    /// A transport over `client`; the transport never shuts it down.
    ///
    /// - Parameters:
    ///   - client: The client to send requests through. Default: `HTTPClient.shared`, which
    ///     needs no shutdown (but retries refused connections; see ``recommendedConfiguration``).
    ///   - maximumBodySize: The largest response body accepted, in bytes; must be positive.
    public init(client: HTTPClient = .shared, maximumBodySize: Int = AsyncHTTPClientTransport.defaultMaximumBodySize) {
        precondition(maximumBodySize > 0, "AsyncHTTPClientTransport: maximumBodySize must be positive, got \(maximumBodySize)")
        self.client = client
        self.maximumBodySize = maximumBodySize
    }

    /// Sends `request` through the client and collects the response body.
    ///
    /// - Throws: a `URLError` (see the type's documentation), or `URLTaskError.unsupportedURL(_:)`
    ///   for a request without an absolute `http` or `https` URL.
    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw URLTaskError.unsupportedURL(request.url)
        }
        let outgoing = try Self.clientRequest(for: request, url: url)
        let timeout = request.timeoutInterval > 0 ? request.timeoutInterval : 60
        let deadline = NIODeadline.now() + .nanoseconds(Int64(min(timeout, 1e9) * 1e9))
        do {
            do {
                return try await exchange(outgoing, url: url, deadline: deadline)
            } catch ChannelError.ioOnClosedChannel where Self.mayResend(request) {
                // A pooled connection was closed under the request or one of its redirects.
                return try await exchange(outgoing, url: url, deadline: deadline)
            }
        } catch {
            throw Self.normalized(error, for: request, cancelled: Task.isCancelled)
        }
    }

    /// Whether a request that met a closed pooled connection is sent again: only an idempotent one.
    static func mayResend(_ request: URLRequest) -> Bool {
        request.hasIdempotentMethod
    }

    /// One request and its whole body, within `deadline`.
    private func exchange(_ request: HTTPClientRequest, url: URL, deadline: NIODeadline) async throws -> (Data, HTTPURLResponse) {
        let response = try await client.execute(request, deadline: deadline)
        // The client's deadline covers the response head only: bound the body by it too.
        let remaining = deadline - .now()
        guard remaining > .zero else { throw HTTPClientError.deadlineExceeded }
        let limit = maximumBodySize
        let body = try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
            group.addTask { try await response.body.collect(upTo: limit) }
            group.addTask {
                try await Task.sleep(nanoseconds: UInt64(remaining.nanoseconds))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let body = first else {
                throw HTTPClientError.deadlineExceeded
            }
            return body
        }
        guard let http = HTTPURLResponse(
            url: url,
            statusCode: Int(response.status.code),
            httpVersion: "HTTP/\(response.version.major).\(response.version.minor)",
            headerFields: Self.headerFields(response.headers)
        ) else {
            throw URLTaskError.notHTTPResponse
        }
        return (Data(body.readableBytesView), http)
    }

    /// The client request for `request`: method, headers and body.
    static func clientRequest(for request: URLRequest, url: URL) throws -> HTTPClientRequest {
        var outgoing = HTTPClientRequest(url: url.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.method)
        for (name, value) in request.allHTTPHeaderFields ?? [:] {
            outgoing.headers.add(name: name, value: value)
        }
        if let body = request.httpBody {
            outgoing.body = .bytes(ByteBuffer(bytes: body))
        } else if let stream = request.httpBodyStream {
            outgoing.body = .bytes(ByteBuffer(bytes: try Self.read(stream)))
        }
        return outgoing
    }

    /// The whole content of a request body stream.
    private static func read(_ stream: InputStream) throws -> Data {
        stream.open()
        defer { stream.close() }
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = stream.read(&chunk, maxLength: chunk.count)
            if count < 0 { throw stream.streamError ?? URLError(.cannotDecodeRawData) }
            if count == 0 { return data }
            data.append(contentsOf: chunk[..<count])
        }
    }

    /// Header fields as `HTTPURLResponse` takes them: repeated names joined with `", "`.
    static func headerFields(_ headers: HTTPHeaders) -> [String: String] {
        var fields: [String: String] = [:]
        for (name, value) in headers {
            if let existing = fields[name] {
                fields[name] = existing + ", " + value
            } else {
                fields[name] = value
            }
        }
        return fields
    }

    /// `error`, from AsyncHTTPClient or swift-nio, as the `URLError` `URLSession` reports for the
    /// same failure (see the failure table in *Using URLTaskManager*); `error` itself is the
    /// result's underlying error. A `URLError` or `URLTaskError` is returned unchanged.
    ///
    /// - Parameters:
    ///   - error: The error the client threw.
    ///   - request: The request that failed.
    ///   - cancelled: Whether the calling task was cancelled: whatever the client reports then
    ///     (a request cancelled while it waits for a connection fails with the pool's last
    ///     connection error), the result is `URLError(.cancelled)`.
    static func normalized(_ error: any Error, for request: URLRequest, cancelled: Bool = false) -> any Error {
        if error is URLError || error is URLTaskError { return error }
        let code: URLError.Code
        if cancelled || error is CancellationError {
            code = .cancelled
        } else if let error = error as? HTTPClientError {
            switch error {
            case .cancelled: code = .cancelled
            case .remoteConnectionClosed: code = .networkConnectionLost
            case .deadlineExceeded, .readTimeout, .writeTimeout, .connectTimeout, .getConnectionFromPoolTimeout: code = .timedOut
            case .invalidURL, .emptyHost, .emptyScheme: code = .badURL
            default: code = .unknown
            }
        } else if let error = error as? HTTPParserError {
            // A close in the middle of the head or body leaves the parser in a state where
            // end of file is not allowed; anything else is a reply that is not HTTP.
            code = error == .invalidEOFState ? .networkConnectionLost : .cannotParseResponse
        } else if let error = error as? IOError {
            switch error.errnoCode {
            case ECONNRESET, EPIPE: code = .networkConnectionLost
            case ECONNREFUSED: code = .cannotConnectToHost
            case ETIMEDOUT: code = .timedOut
            default: code = .unknown
            }
        } else if let error = error as? ChannelError {
            switch error {
            case .ioOnClosedChannel, .eof, .outputClosed, .alreadyClosed: code = .networkConnectionLost
            case .connectTimeout: code = .timedOut
            default: code = .unknown
            }
        } else if error is NIOConnectionError {
            code = .cannotConnectToHost
        } else if error is NIOTooManyBytesError {
            code = .dataLengthExceedsMaximum
        } else {
            code = .unknown
        }
        var userInfo: [String: Any] = [
            NSUnderlyingErrorKey: error as NSError,
            NSLocalizedDescriptionKey: "\(code == .unknown ? "HTTP request failed" : "\(code)"): \(error)",
        ]
        if let url = request.url {
            userInfo[NSURLErrorFailingURLErrorKey] = url
        }
        return URLError(code, userInfo: userInfo)
    }
}

#endif
