#if Examples
import Foundation
import TaskKit
import TaskKitLoopbackServer
import TaskKitTestSupport
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP

/// How many times a request reaches the server when the connection under it dies, counted at the
/// server: the rows "pooled connection dies under a request" of the failure table in *Using
/// URLTaskManager*. No retry policy is installed, so whatever reaches the server twice was sent
/// twice by the transport or the client under it.
@Suite("Requests reach the server no more often than their policy allows", .serialized)
struct HTTPDeliveryTests {
    /// The most times a request of `method` may reach the server through `transport` when the
    /// pooled connection it goes out on dies without a reply, and no policy retries it.
    static func allowedDeliveries(of method: String, through transport: HTTPTestTransport) -> Int {
        HTTPRetryPolicy.idempotentMethods.contains(method) ? 2 : 1
    }

    @Test(
        "a request on a pooled connection that the server closes after reading it is sent once unless idempotent",
        .scaledTimeLimit(minutes: 1),
        arguments: HTTPTestTransport.allCases, ["POST", "PATCH", "GET", "PUT"]
    )
    func pooledConnectionDiesUnderARequest(_ transport: HTTPTestTransport, _ method: String) async throws {
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(transport: transport.make(), timeout: TestDeadline.standard)
            // A request that leaves a kept-alive connection in the client's pool.
            let (warm, _) = try await manager.data(for: URLRequest(url: server.keepAliveURL("warm")))
            #expect(warm == Data("warm".utf8))
            var request = URLRequest(url: server.keepAliveURL("dies-when-reused"))
            request.httpMethod = method
            if method != "GET" { request.httpBody = Data(#"{"amount":100}"#.utf8) }
            let outcome = await Result { try await manager.data(for: request) }
            let deliveries = await server.keepAliveHits("dies-when-reused")
            #expect(deliveries >= 1)
            #expect(
                deliveries <= Self.allowedDeliveries(of: method, through: transport),
                "\(method) reached the server \(deliveries) times through \(transport)"
            )
            switch outcome {
            case .success(let (data, response)):
                // Only an answer from a new connection: the server never answers on a reused one.
                #expect(response.statusCode == 200 && data == Data("ok".utf8))
                #expect(
                    deliveries == 2 || (transport == .urlSession && URLSessionTransport.goesOutOnItsOwnConnection(request)),
                    "a success needs a request on a new connection"
                )
            case .failure(let error):
                #expect((error as? URLError)?.code == .networkConnectionLost, "got \(error)")
                #expect(deliveries == 1)
            }
        }
    }

    @Test(
        "a POST redirected by a server that then closes the connection reaches the first hop once, 60 times in a row",
        .scaledTimeLimit(minutes: 2),
        arguments: HTTPTestTransport.allCases
    )
    func redirectedPostIsNotSentAgainFromTheFirstHop(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(transport: transport.make(), timeout: TestDeadline.standard)
            let rounds = 60
            var answered = 0
            for _ in 0..<rounds {
                var request = URLRequest(url: server.keepAliveURL("redirect?to=/keep-alive/target&close=1"))
                request.httpMethod = "POST"
                request.httpBody = Data(#"{"amount":100}"#.utf8)
                switch await Result(catching: { try await manager.data(for: request) }) {
                case .success(let (data, response)):
                    #expect(response.statusCode == 200 && data == Data("target".utf8))
                    answered += 1
                case .failure(let error):
                    #expect((error as? URLError)?.code == .networkConnectionLost, "got \(error)")
                }
            }
            #expect(await server.keepAliveHits("redirect") == rounds, "a POST reached the first hop more than once")
            #expect(await server.keepAliveHits("target") <= rounds)
            #expect(answered >= 1, "no redirect was followed at all")
        }
    }

    @Test(
        "a POST redirected (307) to a kept-alive connection that dies under it reaches the target once",
        .scaledTimeLimit(minutes: 1),
        arguments: HTTPTestTransport.allCases
    )
    func redirectTargetOnADyingConnection(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let manager = URLTaskManager(transport: transport.make(), timeout: TestDeadline.standard)
            var request = URLRequest(url: server.keepAliveURL("redirect?to=/keep-alive/dies-when-reused"))
            request.httpMethod = "POST"
            request.httpBody = Data(#"{"amount":100}"#.utf8)
            let outcome = await Result { try await manager.data(for: request) }
            #expect(await server.keepAliveHits("redirect") == 1)
            #expect(await server.keepAliveHits("dies-when-reused") == 1, "the redirected POST reached its target twice")
            if case .failure(let error) = outcome {
                #expect((error as? URLError)?.code == .networkConnectionLost, "got \(error)")
            }
        }
    }

    @Test("the transport follows a non-idempotent request's redirects as URLSession does")
    func redirectRules() throws {
        let from = URL(string: "http://127.0.0.1:8080/pay")!
        func response(_ status: Int, _ location: String) -> HTTPURLResponse {
            HTTPURLResponse(url: from, statusCode: status, httpVersion: "HTTP/1.1", headerFields: ["Location": location])!
        }
        var post = URLRequest(url: from)
        post.httpMethod = "POST"
        post.httpBody = Data("x".utf8)
        post.setValue("application/json", forHTTPHeaderField: "Content-Type")
        post.setValue("Bearer t", forHTTPHeaderField: "Authorization")
        for status in [307, 308] {
            let next = try #require(URLSessionTransport.redirect(of: post, by: response(status, "/done")))
            #expect(next.httpMethod == "POST" && next.httpBody == post.httpBody)
            #expect(next.url?.absoluteString == "http://127.0.0.1:8080/done")
            #expect(next.value(forHTTPHeaderField: "Authorization") == "Bearer t")
        }
        for status in [301, 302, 303] {
            let next = try #require(URLSessionTransport.redirect(of: post, by: response(status, "/done")))
            #expect(next.httpMethod == "GET" && next.httpBody == nil)
            #expect(next.value(forHTTPHeaderField: "Content-Type") == nil)
        }
        var patch = post
        patch.httpMethod = "PATCH"
        #expect(URLSessionTransport.redirect(of: patch, by: response(302, "/done"))?.httpMethod == "PATCH")
        #expect(URLSessionTransport.redirect(of: patch, by: response(303, "/done"))?.httpMethod == "GET")
        // Credentials stay with their origin.
        let elsewhere = try #require(URLSessionTransport.redirect(of: post, by: response(307, "http://example.com/done")))
        #expect(elsewhere.value(forHTTPHeaderField: "Authorization") == nil)
        // Not redirects to follow.
        #expect(URLSessionTransport.redirect(of: post, by: response(304, "/done")) == nil)
        #expect(URLSessionTransport.redirect(of: post, by: response(307, "ftp://example.com/x")) == nil)
    }
}
#endif
