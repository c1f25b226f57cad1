import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How many requests a ``URLTaskManager`` sends to one host at once, and how many may wait for
/// a slot: its `hostConcurrency:` parameter.
///
/// Each attempt takes a slot of its request's host just before it goes to the transport (after
/// the interceptors adapted it) and gives it back as soon as the transport returns: a request
/// holds no slot while its bearer token is refreshed or while it waits before a retry, and each
/// retry queues again. Attempts that find every slot taken wait in one first-in, first-out
/// queue per host:
/// - a waiting attempt keeps its request's deadline: when it passes, the request leaves the
///   queue and fails with `TaskError.timedOut`;
/// - a waiting request whose caller is cancelled leaves the queue at once (`CancellationError`,
///   or `TaskError.cancelled` through a `TaskHandle`);
/// - an attempt that finds ``maximumQueued`` attempts already waiting fails at once with
///   ``URLTaskError/hostQueueFull(host:maximumQueued:)``, without reaching the network or the
///   retry interceptors.
///
/// A host is the URL's host, lowercased, and its port (the scheme's default when the URL names
/// none): `https://api.example.com` and `https://api.example.com:8443` are two hosts. A host's
/// state exists only while it has a request in flight or waiting, so the manager keeps state
/// for at most as many hosts as it has requests under way.
///
/// Coalesced callers that join a flight take no slot: only the flight's attempts do.
public struct HostConcurrencyLimit: Sendable, Hashable {
    /// The most attempts in flight to one host at once. At least 1.
    public let maximumInFlight: Int
    /// The most attempts that may wait for a slot of one host; `0` for none (an attempt that
    /// finds every slot taken then fails at once).
    public let maximumQueued: Int

    /// Creates a limit.
    ///
    /// - Parameters:
    ///   - maximumInFlight: The most attempts in flight to one host. Default: 6 (a browser's
    ///     connections per host; OkHttp's dispatcher allows 5).
    ///   - maximumQueued: The most attempts waiting for a slot of one host. Default: 1,000.
    /// - Precondition: `maximumInFlight` ≥ 1 and `maximumQueued` ≥ 0.
    public init(maximumInFlight: Int = 6, maximumQueued: Int = 1_000) {
        precondition(maximumInFlight >= 1, "HostConcurrencyLimit: maximumInFlight must be ≥ 1, got \(maximumInFlight)")
        precondition(maximumQueued >= 0, "HostConcurrencyLimit: maximumQueued must be ≥ 0, got \(maximumQueued)")
        self.maximumInFlight = maximumInFlight
        self.maximumQueued = maximumQueued
    }

    /// The host key of `url`: its host, lowercased, `:` and its port (80 for `http`, 443 for
    /// `https` when none is given). `nil` without a host.
    ///
    /// Called once per attempt: a host that is already lowercase ASCII (the usual case) is not
    /// lowercased again, and the scheme is lowercased only when it is neither `https` nor `http`.
    static func host(of url: URL?) -> String? {
        guard let url, let host = url.host else { return nil }
        let port = url.port ?? (isHTTPS(url.scheme) ? 443 : 80)
        var key = isLowercaseASCII(host) ? host : host.lowercased()
        key += ":"
        key += String(port)
        return key
    }

    private static func isHTTPS(_ scheme: String?) -> Bool {
        guard let scheme else { return false }
        return scheme == "https" || (scheme != "http" && scheme.lowercased() == "https")
    }

    private static func isLowercaseASCII(_ string: String) -> Bool {
        string.utf8.allSatisfy { $0 < 0x80 && !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
    }
}
