/// A bearer access token and how long it stays valid.
public struct BearerCredential: Sendable, Hashable, CustomStringConvertible {
    /// The token sent as `Authorization: Bearer <accessToken>`.
    public var accessToken: String
    /// How long the token is valid, counted from the moment the authenticator receives it;
    /// `nil` when the server did not say (the token is then used until a 401).
    public var expiresIn: Duration?

    /// Creates a credential.
    ///
    /// - Parameters:
    ///   - accessToken: The token.
    ///   - expiresIn: Its lifetime from now, or `nil` if unknown. Must not be negative.
    public init(accessToken: String, expiresIn: Duration? = nil) {
        if let expiresIn {
            precondition(expiresIn >= .zero, "BearerCredential: expiresIn must be >= 0, got \(expiresIn)")
        }
        self.accessToken = accessToken
        self.expiresIn = expiresIn
    }

    /// The token is not printed, so credentials can be logged safely.
    public var description: String {
        "BearerCredential(accessToken: <\(accessToken.count) characters>, expiresIn: \(expiresIn.map { "\($0)" } ?? "unknown"))"
    }
}

/// Why a request could not be authenticated.
public enum AuthenticationError: Error, Sendable, CustomStringConvertible {
    /// The token refresh failed; every request waiting for it fails with this error.
    case refreshFailed(underlying: any Error)
    /// More than `limit` refreshes were needed within `window`: the server keeps rejecting fresh
    /// tokens, so the authenticator stops instead of refreshing forever.
    case refreshLoopDetected(limit: Int, window: Duration)
    /// The server rejected the request (`401`) again after it had been replayed `replays` times
    /// with a newer token (`BearerTokenAuthenticator`'s `maximumReplays:`).
    case credentialRejected(replays: Int)

    /// A sentence naming the case and its details.
    public var description: String {
        switch self {
        case .refreshFailed(let underlying):
            return "AuthenticationError.refreshFailed: the token refresh failed: \(underlying)"
        case .refreshLoopDetected(let limit, let window):
            return "AuthenticationError.refreshLoopDetected: more than \(limit) token refreshes within \(window)"
        case .credentialRejected(let replays):
            return "AuthenticationError.credentialRejected: the server rejected the request again after \(replays) replays with a newer token"
        }
    }
}
