#if Examples
import FlyingFox
import FlyingSocks
import Foundation

/// An HTTP server on `127.0.0.1` (a free port chosen by the kernel) with the endpoints TaskKit's
/// HTTP tests, benchmarks and demo exercise.
///
/// It never binds anything but the loopback interface. Two listeners run side by side:
/// a FlyingFox server for every well-formed endpoint, and a tiny raw TCP listener for the
/// deliberately broken ones (a connection closed mid-body, bytes that are not HTTP at all).
///
/// | Endpoint | Behaviour |
/// |---|---|
/// | `POST /token` | Issues a fresh bearer token valid for ``Knobs/tokenLifetime``; counts refreshes; fails with 500 while ``Knobs/tokenFailures`` is positive |
/// | `GET /protected` | 200 with `Authorization: Bearer <valid token>`, 401 otherwise |
/// | `GET /flaky?key=K`, `POST /flaky?key=K` | 503 for the first ``Knobs/failuresBeforeSuccess`` calls per key (both methods share the count), then 200 |
/// | `GET /flaky-protected?key=K` | 401 without a valid bearer token; with one, as `GET /flaky` (its own per-key count, only authorised calls count) |
/// | `GET /ratelimited?key=K&mode=seconds|date&after=N[&from=T]` | 429 with `Retry-After` (delta seconds, or the HTTP-date of now — or of `T` seconds since 1970 — plus `N` s) on the first call per key, then 200 |
/// | `GET /slow?ms=N` | 200 after `N` ms (default ``Knobs/slowDelay``) |
/// | `GET /profile?user=U` | a small JSON profile after ``Knobs/profileDelay`` |
/// | `GET /search?q=Q` | a JSON array of results for `Q` |
/// | `POST /analytics` | accepts a JSON array of events, counts them (``analyticsEventCount()``) |
/// | `GET /hello` | 200 with a short text body (benchmarks) |
/// | `GET /concurrent?ms=N` | 200 after `N` ms (default 10); counts the requests it works on at once, and when each arrived, per `Host` header (``concurrency(host:)``) |
/// | `GET /slow-first?key=K&ms=N`, `POST /slow-first?key=K&ms=N` | the first call per key answers after `N` ms (default 2,000), later ones at once; the body is the call's number (`1`, `2`, …) |
/// | `GET /status?code=N` | an empty response with status `N` |
/// | `GET /headers?code=N` | the request's headers, one `name: value` line each (names lowercased, sorted), with status `N` (default 200) |
/// | ``truncatedURL`` | a 200 header announcing 1,000 bytes, 10 bytes of body, then the connection closes |
/// | ``garbageURL`` | bytes that are not an HTTP response, then the connection closes |
/// | ``misbehavingURL(_:)`` | one of the ``Misbehaviour``s: a connection closed before any reply, mid-headers or mid-body, reset, or left without a reply |
/// | ``keepAliveURL(_:)`` `warm` | 200 with a 4-byte body; the connection stays open for the next request (HTTP/1.1 keep-alive) |
/// | ``keepAliveURL(_:)`` `dies-when-reused` | on a new connection: 200, connection kept; on a connection that served a request before: reads the request (head and `Content-Length` body) and closes without a reply |
/// | ``keepAliveURL(_:)`` `redirect?to=P&status=N&close=1` | status `N` (default 307) with `Location: P`, no body; the connection stays open, or is closed right after with `close=1` |
/// | ``keepAliveURL(_:)`` `target` | 200 with a 6-byte body, connection kept |
/// | ``keepAliveURL(_:)`` `closed-mid-headers` | the status line and part of a header, then a close |
///
/// | ``keepAliveURL(_:)`` `flight?key=K&ms=N&fail=F` | answers after `N` ms (default 2) with the request's `X-Flight` header as the body, `503` for the first `F` requests carrying one `X-Flight` value, `200` after; closes the connection after answering, or as soon as the client closes it first (then it records no answer). Each answer's interval is kept (``flightIntervals()``) |
///
/// The `keepAliveURL` endpoints count each request they read, whole, by path
/// (``keepAliveHits(_:)``): a request that reaches the server twice counts twice.
public final class LoopbackServer: Sendable {
    /// The endpoints whose hits are counted.
    public enum Endpoint: String, Sendable, Hashable, CaseIterable {
        case token, protected, flaky, ratelimited, slow, profile, search, analytics, hello, status, headers, concurrent
        /// `GET /slow-first`, `POST /slow-first`.
        case slowFirst
        case truncated, garbage
        /// Any ``misbehavingURL(_:)``.
        case misbehaving
        /// `GET /flaky-protected`.
        case flakyProtected
    }

    /// Server behaviour that tests and the demo can change while it runs.
    public struct Knobs: Sendable {
        /// The lifetime `POST /token` announces (`expires_in`), and how long an issued token stays
        /// valid unless ``tokenAcceptedFor`` says otherwise. Default 60 s.
        public var tokenLifetime: TimeInterval = 60
        /// How long the server accepts an issued token, in real time, when it differs from the
        /// announced ``tokenLifetime``: a test whose client reads time from a manual clock sets it
        /// long, so that the verdict does not depend on how fast the machine is. Default `nil`
        /// (``tokenLifetime``).
        public var tokenAcceptedFor: TimeInterval?
        /// How many upcoming `POST /token` calls fail with 500. Default 0.
        public var tokenFailures: Int = 0
        /// How long `POST /token` takes to answer. Default 0.
        public var tokenDelay: TimeInterval = 0
        /// How many calls per key `GET /flaky` fails with 503 before succeeding. Default 2.
        public var failuresBeforeSuccess: Int = 2
        /// The default delay of `GET /slow`. Default 2 s.
        public var slowDelay: TimeInterval = 2
        /// The delay of `GET /profile`. Default 0.2 s.
        public var profileDelay: TimeInterval = 0.2

        /// The defaults.
        public init() {}
    }

    /// The ways the raw listener breaks a response on purpose (``misbehavingURL(_:)``). Each
    /// reads the request head first.
    public enum Misbehaviour: String, Sendable, CaseIterable {
        /// Closes the connection without sending a byte.
        case closedBeforeReply = "closed-before-reply"
        /// Sends the status line and part of a header, then closes.
        case closedMidHeaders = "closed-mid-headers"
        /// Announces `Content-Length: 1000`, sends 10 bytes of body, then closes.
        case closedMidBodyWithLength = "closed-mid-body-length"
        /// Sends a chunked body's first chunk, then closes without the last chunk.
        case closedMidBodyChunked = "closed-mid-body-chunked"
        /// Sends a body delimited only by the close (no length, not chunked) and closes: the
        /// client cannot tell it from a complete body.
        case closedMidBodyWithoutLength = "closed-mid-body-unframed"
        /// Resets the connection (`SO_LINGER` 0, then close): the client sees `ECONNRESET`.
        case reset
        /// Sends a status line that is not HTTP, then closes.
        case garbageStatusLine = "garbage-status-line"
        /// Sends nothing and keeps the connection open until the client gives up (or 60 s).
        case noReply = "no-reply"
    }

    /// The URL on the raw listener that misbehaves as `misbehaviour` says.
    public func misbehavingURL(_ misbehaviour: Misbehaviour) -> URL {
        rawBaseURL.appendingPathComponent(misbehaviour.rawValue)
    }

    /// The URL of `pathAndQuery` (for example `"warm"` or `"redirect?to=/keep-alive/target"`)
    /// among the raw listener's keep-alive endpoints, under `/keep-alive/`.
    public func keepAliveURL(_ pathAndQuery: String) -> URL {
        URL(string: "/keep-alive/" + pathAndQuery, relativeTo: rawBaseURL)!.absoluteURL
    }

    /// How many whole requests the keep-alive endpoint `path` (`"dies-when-reused"`, …, without
    /// the query) has read.
    public func keepAliveHits(_ path: String) async -> Int { await state.keepAliveHits[path, default: 0] }

    /// An interval during which the `flight` endpoint worked on a request it answered.
    public struct FlightInterval: Sendable {
        /// The `key` query parameter.
        public let key: String
        /// The request's `X-Flight` header.
        public let flight: String
        /// When the server had read the request.
        public let start: ContinuousClock.Instant
        /// When it had written the answer.
        public let end: ContinuousClock.Instant
    }

    /// Every answered request of the `flight` keep-alive endpoint, in the order they ended.
    public func flightIntervals() async -> [FlightInterval] { await state.flightIntervals }

    /// What `GET /concurrent` saw of one host.
    public struct Concurrency: Sendable, Equatable {
        /// The requests it works on now.
        public var inFlight = 0
        /// The most it worked on at once.
        public var peak = 0
        /// How many it read.
        public var total = 0
        /// When it read each, in order, on the continuous clock.
        public var arrivals: [ContinuousClock.Instant] = []
    }

    /// What `GET /concurrent` saw of the requests whose `Host` header is `host` (as
    /// `"127.0.0.1:54321"`).
    public func concurrency(host: String) async -> Concurrency { await state.concurrency[host, default: Concurrency()] }

    /// The base URL of the well-formed endpoints, e.g. `http://127.0.0.1:54321`.
    public let baseURL: URL
    /// A URL whose response announces 1,000 body bytes, sends 10, then closes the connection.
    public let truncatedURL: URL
    /// A URL whose "response" is not HTTP at all.
    public let garbageURL: URL

    private let rawBaseURL: URL
    private let state: ServerState
    private let server: HTTPServer
    private let serverTask: Task<Void, any Error>
    private let raw: RawListener

    private init(
        baseURL: URL, rawBaseURL: URL, state: ServerState, server: HTTPServer,
        serverTask: Task<Void, any Error>, raw: RawListener
    ) {
        self.baseURL = baseURL
        self.truncatedURL = rawBaseURL.appendingPathComponent("truncated")
        self.garbageURL = rawBaseURL.appendingPathComponent("garbage")
        self.rawBaseURL = rawBaseURL
        self.state = state
        self.server = server
        self.serverTask = serverTask
        self.raw = raw
    }

    /// Starts both listeners on `127.0.0.1`, each on a free port, and returns once they accept
    /// connections.
    ///
    /// - Parameter knobs: The initial behaviour.
    public static func start(knobs: Knobs = Knobs()) async throws -> LoopbackServer {
        let state = ServerState(knobs: knobs)
        let server = HTTPServer(
            address: try sockaddr_in.inet(ip4: "127.0.0.1", port: 0),
            timeout: 30,
            logger: .disabled
        )
        await state.install(on: server)
        let serverTask = Task { try await server.run() }
        // A hang guard only: listening normally takes milliseconds, but on a loaded 2-core
        // machine (a test run under ThreadSanitizer) the server task may wait seconds for a thread.
        try await server.waitUntilListening(timeout: 60)
        guard case .ip4(_, let port)? = await server.listeningAddress else {
            serverTask.cancel()
            throw SocketError.unsupportedAddress
        }
        let raw = try await RawListener.start(state: state)
        return LoopbackServer(
            baseURL: URL(string: "http://127.0.0.1:\(port)")!,
            rawBaseURL: URL(string: "http://127.0.0.1:\(raw.port)")!,
            state: state, server: server, serverTask: serverTask, raw: raw
        )
    }

    /// Stops both listeners; later connections are refused. Idempotent.
    public func stop() async {
        await server.stop(timeout: 1)
        serverTask.cancel()
        raw.stop()
    }

    /// The URL of `path` (for example `"protected"` or `"search?q=swift"`) on this server.
    public func url(_ path: String) -> URL {
        URL(string: path, relativeTo: baseURL)!.absoluteURL
    }

    /// The number of requests `endpoint` has received.
    public func hits(_ endpoint: Endpoint) async -> Int { await state.hits[endpoint, default: 0] }

    /// The number of tokens `POST /token` has issued.
    public func refreshCount() async -> Int { await state.issuedTokens }

    /// The number of analytics events received by `POST /analytics`.
    public func analyticsEventCount() async -> Int { await state.analyticsEvents }

    /// The current knobs.
    public func knobs() async -> Knobs { await state.knobs }

    /// Changes the knobs.
    public func updateKnobs(_ change: @Sendable (inout Knobs) -> Void) async {
        await state.updateKnobs(change)
    }

    /// Makes every token issued so far invalid, as if they had all expired.
    public func expireAllTokens() async { await state.expireAllTokens() }

    /// Issues a valid token directly (without counting a refresh), for tests that start signed in.
    public func issueToken() async -> String { await state.issueToken(counted: false) }

    /// Holds every `GET /profile` (counted on arrival) until ``releaseProfiles()``: a test
    /// orders events with it instead of a delay. A request that arrives after the release is not
    /// held.
    public func holdProfiles() async { await state.holdProfiles() }

    /// Lets every held `GET /profile` answer (after ``Knobs/profileDelay``), and stops holding.
    public func releaseProfiles() async { await state.releaseProfiles() }
}

/// The server's mutable state, isolated in an actor (handlers are async anyway).
actor ServerState {
    var knobs: Knobs
    var hits: [LoopbackServer.Endpoint: Int] = [:]
    var tokens: [String: Date] = [:]
    var issuedTokens = 0
    var tokenSerial = 0
    var flakyCalls: [String: Int] = [:]
    var flakyProtectedCalls: [String: Int] = [:]
    var rateLimitedCalls: [String: Int] = [:]
    var slowFirstCalls: [String: Int] = [:]
    var analyticsEvents = 0
    var keepAliveHits: [String: Int] = [:]
    var flightIntervals: [LoopbackServer.FlightInterval] = []
    var flightAttempts: [String: Int] = [:]
    var concurrency: [String: LoopbackServer.Concurrency] = [:]
    /// The held `GET /profile` requests while ``LoopbackServer/holdProfiles()`` holds them;
    /// `nil` when they are not held.
    var heldProfiles: [CheckedContinuation<Void, Never>]?

    typealias Knobs = LoopbackServer.Knobs

    init(knobs: Knobs) { self.knobs = knobs }

    func updateKnobs(_ change: @Sendable (inout Knobs) -> Void) { change(&knobs) }

    func hit(_ endpoint: LoopbackServer.Endpoint) { hits[endpoint, default: 0] += 1 }

    func holdProfiles() {
        if heldProfiles == nil { heldProfiles = [] }
    }

    func releaseProfiles() {
        let held = heldProfiles ?? []
        heldProfiles = nil
        for request in held { request.resume() }
    }

    /// Returns once the profiles are not held (at once, when they are not).
    func waitUntilProfilesReleased() async {
        guard heldProfiles != nil else { return }
        await withCheckedContinuation { heldProfiles!.append($0) }
    }

    func keepAliveHit(_ path: String) { keepAliveHits[path, default: 0] += 1 }

    /// Counts an attempt of flight `flight`; returns how many came before it.
    func flightAttempt(_ flight: String) -> Int {
        defer { flightAttempts[flight, default: 0] += 1 }
        return flightAttempts[flight, default: 0]
    }

    func recordFlight(_ interval: LoopbackServer.FlightInterval) { flightIntervals.append(interval) }

    func expireAllTokens() {
        for key in tokens.keys { tokens[key] = .distantPast }
    }

    func issueToken(counted: Bool) -> String {
        tokenSerial += 1
        if counted { issuedTokens += 1 }
        let token = "token-\(tokenSerial)-\(UUID().uuidString.prefix(8))"
        tokens[token] = Date().addingTimeInterval(knobs.tokenAcceptedFor ?? knobs.tokenLifetime)
        return token
    }

    /// `nil` when the token endpoint must fail now.
    func refreshToken() -> (token: String, lifetime: TimeInterval)? {
        if knobs.tokenFailures > 0 {
            knobs.tokenFailures -= 1
            return nil
        }
        return (issueToken(counted: true), knobs.tokenLifetime)
    }

    func isValid(authorization: String?) -> Bool {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return false }
        let token = String(authorization.dropFirst("Bearer ".count))
        guard let expiry = tokens[token] else { return false }
        return expiry > Date()
    }

    func flakyCall(key: String) -> Bool {
        let calls = flakyCalls[key, default: 0]
        flakyCalls[key] = calls + 1
        return calls >= knobs.failuresBeforeSuccess
    }

    func flakyProtectedCall(key: String) -> Bool {
        let calls = flakyProtectedCalls[key, default: 0]
        flakyProtectedCalls[key] = calls + 1
        return calls >= knobs.failuresBeforeSuccess
    }

    /// The number of this call of `GET /slow-first` for `key`, from 1.
    func slowFirstCall(key: String) -> Int {
        slowFirstCalls[key, default: 0] += 1
        return slowFirstCalls[key]!
    }

    func rateLimitedCall(key: String) -> Bool {
        let calls = rateLimitedCalls[key, default: 0]
        rateLimitedCalls[key] = calls + 1
        return calls >= 1
    }

    func recordAnalytics(_ count: Int) { analyticsEvents += count }

    func concurrentStarted(host: String) {
        concurrency[host, default: LoopbackServer.Concurrency()].inFlight += 1
        concurrency[host]!.total += 1
        concurrency[host]!.arrivals.append(.now)
        concurrency[host]!.peak = max(concurrency[host]!.peak, concurrency[host]!.inFlight)
    }

    func concurrentEnded(host: String) { concurrency[host]!.inFlight -= 1 }

    func install(on server: HTTPServer) async {
        await server.appendRoute("POST /token") { [self] _ in
            await hit(.token)
            let delay = await knobs.tokenDelay
            if delay > 0 { try await Task.sleep(for: .seconds(delay)) }
            guard let (token, lifetime) = await refreshToken() else {
                return HTTPResponse(statusCode: .internalServerError, body: Data("token service down".utf8))
            }
            let body = #"{"access_token":"\#(token)","token_type":"Bearer","expires_in":\#(lifetime)}"#
            return Self.json(body)
        }
        await server.appendRoute("GET /protected") { [self] request in
            await hit(.protected)
            guard await isValid(authorization: request.headers[.authorization]) else {
                var headers = HTTPHeaders()
                headers[HTTPHeader("WWW-Authenticate")] = #"Bearer error="invalid_token""#
                return HTTPResponse(statusCode: .unauthorized, headers: headers)
            }
            return Self.json(#"{"secret":"loopback"}"#)
        }
        for method in ["GET", "POST"] {
            await server.appendRoute(HTTPRoute("\(method) /flaky")) { [self] request in
                await hit(.flaky)
                let key = request.query["key"] ?? "default"
                guard await flakyCall(key: key) else {
                    return HTTPResponse(statusCode: .serviceUnavailable)
                }
                return HTTPResponse(statusCode: .ok, body: Data("recovered \(key)".utf8))
            }
        }
        await server.appendRoute("GET /flaky-protected") { [self] request in
            await hit(.flakyProtected)
            guard await isValid(authorization: request.headers[.authorization]) else {
                var headers = HTTPHeaders()
                headers[HTTPHeader("WWW-Authenticate")] = #"Bearer error="invalid_token""#
                return HTTPResponse(statusCode: .unauthorized, headers: headers)
            }
            let key = request.query["key"] ?? "default"
            guard await flakyProtectedCall(key: key) else {
                return HTTPResponse(statusCode: .serviceUnavailable)
            }
            return HTTPResponse(statusCode: .ok, body: Data("recovered \(key)".utf8))
        }
        await server.appendRoute("GET /ratelimited") { [self] request in
            await hit(.ratelimited)
            let key = request.query["key"] ?? "default"
            guard await rateLimitedCall(key: key) else {
                let after = Int(request.query["after"] ?? "") ?? 1
                let value: String
                if request.query["mode"] == "date" {
                    // `from=T` (seconds since 1970) pins the date to T + N, for exact tests.
                    let from = Double(request.query["from"] ?? "").map(Date.init(timeIntervalSince1970:)) ?? Date()
                    value = Self.httpDate(from.addingTimeInterval(TimeInterval(after)))
                } else {
                    value = String(after)
                }
                var headers = HTTPHeaders()
                headers[HTTPHeader("Retry-After")] = value
                return HTTPResponse(statusCode: .tooManyRequests, headers: headers)
            }
            return HTTPResponse(statusCode: .ok, body: Data("allowed \(key)".utf8))
        }
        await server.appendRoute("GET /slow") { [self] request in
            await hit(.slow)
            let milliseconds = Double(request.query["ms"] ?? "").map { $0 / 1000 }
            let delay = if let milliseconds { milliseconds } else { await knobs.slowDelay }
            try await Task.sleep(for: .seconds(delay))
            return HTTPResponse(statusCode: .ok, body: Data("slow".utf8))
        }
        await server.appendRoute("GET /profile") { [self] request in
            await hit(.profile)
            await waitUntilProfilesReleased()
            let delay = await knobs.profileDelay
            if delay > 0 { try await Task.sleep(for: .seconds(delay)) }
            let user = request.query["user"] ?? "me"
            return Self.json(#"{"user":"\#(Self.jsonEscaped(user))","name":"Loopback User","plan":"pro"}"#)
        }
        await server.appendRoute("GET /search") { [self] request in
            await hit(.search)
            let query = Self.jsonEscaped(request.query["q"] ?? "")
            return Self.json(#"{"query":"\#(query)","results":["\#(query) 1","\#(query) 2","\#(query) 3"]}"#)
        }
        await server.appendRoute("POST /analytics") { [self] request in
            await hit(.analytics)
            let body = try await request.bodyData
            guard let events = try? JSONSerialization.jsonObject(with: body) as? [Any] else {
                return HTTPResponse(statusCode: .badRequest, body: Data("expected a JSON array".utf8))
            }
            await recordAnalytics(events.count)
            return Self.json(#"{"accepted":\#(events.count)}"#)
        }
        await server.appendRoute("GET /hello") { [self] _ in
            await hit(.hello)
            return HTTPResponse(statusCode: .ok, body: Data("hello".utf8))
        }
        for method in ["GET", "POST"] {
            await server.appendRoute(HTTPRoute("\(method) /slow-first")) { [self] request in
                await hit(.slowFirst)
                let call = await slowFirstCall(key: request.query["key"] ?? "default")
                if call == 1 {
                    try? await Task.sleep(for: .milliseconds(Int(request.query["ms"] ?? "") ?? 2_000))
                }
                return HTTPResponse(statusCode: .ok, body: Data(String(call).utf8))
            }
        }
        await server.appendRoute("GET /concurrent") { [self] request in
            await hit(.concurrent)
            let host = request.headers[HTTPHeader("Host")] ?? "-"
            await concurrentStarted(host: host)
            let milliseconds = Int(request.query["ms"] ?? "") ?? 10
            try? await Task.sleep(for: .milliseconds(milliseconds))
            await concurrentEnded(host: host)
            return HTTPResponse(statusCode: .ok, body: Data("concurrent".utf8))
        }
        await server.appendRoute("GET /headers") { [self] request in
            await hit(.headers)
            let code = Int(request.query["code"] ?? "") ?? 200
            let lines = request.headers.map { "\($0.key.rawValue.lowercased()): \($0.value)" }.sorted()
            return HTTPResponse(
                statusCode: HTTPStatusCode(code, phrase: "Status \(code)"),
                body: Data(lines.joined(separator: "\n").utf8)
            )
        }
        await server.appendRoute("GET /status") { [self] request in
            await hit(.status)
            let code = Int(request.query["code"] ?? "") ?? 200
            return HTTPResponse(statusCode: HTTPStatusCode(code, phrase: "Status \(code)"))
        }
    }

    static func json(_ body: String) -> HTTPResponse {
        HTTPResponse(statusCode: .ok, headers: [.contentType: "application/json"], body: Data(body.utf8))
    }

    static func jsonEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }

    static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}

/// A raw TCP listener on `127.0.0.1` for the responses FlyingFox (rightly) refuses to produce.
final class RawListener: Sendable {
    let port: UInt16
    private let socket: AsyncSocket
    private let task: Task<Void, Never>

    private init(port: UInt16, socket: AsyncSocket, task: Task<Void, Never>) {
        self.port = port
        self.socket = socket
        self.task = task
    }

    static func start(state: ServerState) async throws -> RawListener {
        let pool: some AsyncSocketPool = .make()
        try await pool.prepare()
        let listening = try Socket(domain: AF_INET, type: .stream)
        try listening.setValue(true, for: .localAddressReuse)
        try listening.bind(to: try sockaddr_in.inet(ip4: "127.0.0.1", port: 0))
        try listening.listen()
        guard case .ip4(_, let port) = try listening.sockname() else {
            try? listening.close()
            throw SocketError.unsupportedAddress
        }
        let socket = try AsyncSocket(socket: listening, pool: pool)
        let task = Task {
            await withDiscardingTaskGroup { group in
                group.addTask { try? await pool.run() }
                do {
                    for try await connection in socket.sockets {
                        group.addTask { await Self.serve(connection, state: state) }
                    }
                } catch {}
                group.cancelAll()
            }
        }
        return RawListener(port: port, socket: socket, task: task)
    }

    func stop() {
        try? socket.close()
        task.cancel()
    }

    private static func serve(_ connection: AsyncSocket, state: ServerState) async {
        defer { try? connection.close() }
        var reader = RawRequestReader(connection: connection)
        var served = 0
        while let head = try? await reader.head() {
            let requestLine = String(decoding: head.prefix { $0 != 13 }, as: UTF8.self)
            let path = requestLine.split(separator: " ").dropFirst().first.map(String.init) ?? ""
            guard path.hasPrefix("/keep-alive/") else {
                await serveOnce(path: path, requestLine: requestLine, on: connection, state: state)
                return
            }
            // A keep-alive endpoint: read the body too, then answer or close.
            guard (try? await reader.body(length: contentLength(of: head))) != nil else { return }
            served += 1
            if path.hasPrefix("/keep-alive/flight") {
                await serveFlight(path: path, head: head, on: connection, state: state)
                return
            }
            guard await serveKeepAlive(path: path, reused: served > 1, on: connection, state: state) else { return }
        }
    }

    /// The value of the head's `Content-Length`, 0 without one.
    private static func contentLength(of head: [UInt8]) -> Int {
        let text = String(decoding: head, as: UTF8.self)
        for line in text.split(separator: "\r\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "content-length" {
                return Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0
            }
        }
        return 0
    }

    /// Answers one request of a keep-alive endpoint; `false` when the connection must close.
    private static func serveKeepAlive(path: String, reused: Bool, on connection: AsyncSocket, state: ServerState) async -> Bool {
        let components = URLComponents(string: path)
        let name = String((components?.path ?? path).dropFirst("/keep-alive/".count))
        let query = Dictionary(
            (components?.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 }
        )
        await state.keepAliveHit(name)
        let reply: String
        var keepOpen = true
        switch name {
        case "warm":
            reply = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nwarm"
        case "dies-when-reused":
            if reused { return false }
            reply = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
        case "redirect":
            let status = query["status"] ?? "307"
            reply = "HTTP/1.1 \(status) Redirect\r\nLocation: \(query["to"] ?? "/keep-alive/target")\r\nContent-Length: 0\r\n\r\n"
            keepOpen = query["close"] != "1"
        case "target":
            reply = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\ntarget"
        case "closed-mid-headers":
            reply = "HTTP/1.1 200 OK\r\nContent-Type: text/pl"
            keepOpen = false
        default:
            reply = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        }
        guard (try? await connection.write(Data(reply.utf8))) != nil else { return false }
        return keepOpen
    }

    /// Answers the `flight` endpoint's request after its delay, unless the client closes first.
    private static func serveFlight(path: String, head: [UInt8], on connection: AsyncSocket, state: ServerState) async {
        let start = ContinuousClock.now
        await state.keepAliveHit("flight")
        let query = Dictionary(
            (URLComponents(string: path)?.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 }
        )
        let key = query["key"] ?? ""
        let milliseconds = Int(query["ms"] ?? "") ?? 2
        let failures = Int(query["fail"] ?? "") ?? 0
        let flight = String(decoding: head, as: UTF8.self).split(separator: "\r\n")
            .first { $0.lowercased().hasPrefix("x-flight:") }
            .map { String($0.dropFirst("x-flight:".count)).trimmingCharacters(in: .whitespaces) } ?? "-"
        guard await waitUnlessClosed(connection, for: .milliseconds(milliseconds)) else { return }
        let failed = await state.flightAttempt(flight) < failures
        let status = failed ? "503 Service Unavailable" : "200 OK"
        let reply = "HTTP/1.1 \(status)\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: \(flight.utf8.count)\r\n\r\n\(flight)"
        guard (try? await connection.write(Data(reply.utf8))) != nil else { return }
        await state.recordFlight(LoopbackServer.FlightInterval(key: key, flight: flight, start: start, end: .now))
    }

    /// Waits `duration`; `false` as soon as the client closes the connection (or sends more).
    ///
    /// Looks at the socket every millisecond with a non-blocking read rather than racing an
    /// awaited read against a sleep: cancelling a FlyingSocks read that has only just started
    /// makes ThreadSanitizer report its cancellation state (initialised on one thread, read by
    /// the cancelling one through the uninstrumented concurrency runtime) as a race.
    private static func waitUnlessClosed(_ connection: AsyncSocket, for duration: Duration) async -> Bool {
        let deadline = ContinuousClock.now + duration
        while true {
            do {
                _ = try connection.socket.read(atMost: 1)
                return false  // the client sent more than one request's worth
            } catch SocketError.blocked {
                // Nothing to read: the client is still waiting.
            } catch {
                return false  // closed or reset
            }
            let now = ContinuousClock.now
            guard now < deadline else { return true }
            guard !Task.isCancelled else { return false }  // the server is stopping
            try? await Task.sleep(for: min(.milliseconds(1), deadline - now))
        }
    }

    /// Answers the one request of a connection to a misbehaving, truncated or garbage endpoint.
    private static func serveOnce(path: String, requestLine: String, on connection: AsyncSocket, state: ServerState) async {
        if let misbehaviour = LoopbackServer.Misbehaviour(rawValue: String(path.dropFirst())) {
            await state.hit(.misbehaving)
            await misbehave(misbehaviour, on: connection)
        } else if requestLine.contains("/truncated") {
            await state.hit(.truncated)
            let response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n0123456789"
            try? await connection.write(Data(response.utf8))
        } else {
            await state.hit(.garbage)
            try? await connection.write(Data("\u{1}\u{2}THIS IS NOT HTTP\r\n\r\n\u{0}\u{7f}garbage".utf8))
        }
    }
}

extension RawListener {
    private static func misbehave(_ misbehaviour: LoopbackServer.Misbehaviour, on connection: AsyncSocket) async {
        let reply: String
        switch misbehaviour {
        case .closedBeforeReply:
            return
        case .closedMidHeaders:
            reply = "HTTP/1.1 200 OK\r\nContent-Type: text/pl"
        case .closedMidBodyWithLength:
            reply = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n0123456789"
        case .closedMidBodyChunked:
            reply = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\na\r\n0123456789\r\n"
        case .closedMidBodyWithoutLength:
            reply = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n0123456789"
        case .reset:
            // A zero linger time makes `close` send RST instead of FIN.
            try? connection.socket.setValue(true, for: ResetOnClose())
            return
        case .garbageStatusLine:
            reply = "HTTQ/9 two hundred\r\n\r\n"
        case .noReply:
            // Until the client closes (the read returns or fails) or a minute passes.
            _ = try? await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await connection.read(atMost: 1) }
                group.addTask { try await Task.sleep(for: .seconds(60)) }
                try await group.next()
                group.cancelAll()
            }
            return
        }
        try? await connection.write(Data(reply.utf8))
    }
}

/// `SO_LINGER` with a zero timeout when set to `true`: closing the socket then resets the
/// connection.
private struct ResetOnClose: SocketOption {
    var name: Int32 { SO_LINGER }
    func makeValue(from socketValue: linger) -> Bool { socketValue.l_onoff != 0 }
    func makeSocketValue(from value: Bool) -> linger { linger(l_onoff: value ? 1 : 0, l_linger: 0) }
}

/// Reads requests off one raw connection: each head up to its blank line, and a body of a given
/// length, keeping whatever arrived beyond them for the next read.
private struct RawRequestReader {
    let connection: AsyncSocket
    private var buffered: [UInt8] = []
    private static let terminator: [UInt8] = Array("\r\n\r\n".utf8)

    init(connection: AsyncSocket) { self.connection = connection }

    /// The next request head, blank line included; throws when the connection ends first or the
    /// head exceeds 16 KiB.
    mutating func head() async throws -> [UInt8] {
        while true {
            if let range = buffered.firstRange(of: Self.terminator) {
                let head = Array(buffered[..<range.upperBound])
                buffered.removeFirst(range.upperBound)
                return head
            }
            guard buffered.count < 16_384 else { throw SocketError.disconnected }
            buffered.append(contentsOf: try await connection.read(atMost: 4096))
        }
    }

    /// The next `length` bytes.
    mutating func body(length: Int) async throws -> [UInt8] {
        while buffered.count < length {
            buffered.append(contentsOf: try await connection.read(atMost: max(4096, length - buffered.count)))
        }
        let body = Array(buffered.prefix(length))
        buffered.removeFirst(length)
        return body
    }
}

/// A port on 127.0.0.1 on which nothing listens, held for as long as this value lives: a
/// connection to it is refused at once (`URLError.cannotConnectToHost`), and no other server can
/// take the port meanwhile.
///
/// The stand-in for "a server that stopped": stopping a server frees its port, and a server
/// started by a parallel test may be given the same port a moment later and answer instead.
/// This socket is bound without `SO_REUSEADDR` and never listens, so the kernel refuses
/// connections to it and neither hands the port out nor lets another socket bind it.
public final class RefusingPort: Sendable {
    /// `http://127.0.0.1:<port>`.
    public let baseURL: URL
    private let socket: Socket

    /// Reserves a free port.
    public init() throws {
        let socket = try Socket(domain: AF_INET, type: .stream)
        do {
            try socket.bind(to: try sockaddr_in.inet(ip4: "127.0.0.1", port: 0))
            guard case .ip4(_, let port) = try socket.sockname() else { throw SocketError.unsupportedAddress }
            self.baseURL = URL(string: "http://127.0.0.1:\(port)")!
            self.socket = socket
        } catch {
            try? socket.close()
            throw error
        }
    }

    deinit { try? socket.close() }

    /// The URL of `path` on this port.
    public func url(_ path: String) -> URL {
        URL(string: path, relativeTo: baseURL)!.absoluteURL
    }
}
#endif
