#if AsyncHTTPClient
// One request through URLTaskManager, in a process of its own, for the HTTP tests that check
// that no server can stop the process: a server closing the connection in the middle of the
// response headers (as the resource, as a redirect's target, as the token endpoint) must end in
// an error the caller sees, and this process must exit normally.
//
//     taskkit-http-probe <urlsession|asynchttpclient> <resource|token> <url>
//
// `resource` sends `GET <url>` (a redirect to a misbehaving target is a resource too); `token`
// signs `GET <url>` through a BearerTokenAuthenticator whose refresh posts to `<url>`. Prints one
// line, `outcome: ...`, and exits 0 when the request failed with an error (what the server
// did), 1 when it succeeded, 64 for bad arguments.
import AsyncHTTPClient
import Foundation
import TaskKitAsyncHTTPClient
import TaskKitHTTP
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count == 3, let url = URL(string: arguments[arguments.startIndex + 2]) else {
    FileHandle.standardError.write(Data("usage: taskkit-http-probe <urlsession|asynchttpclient> <resource|token> <url>\n".utf8))
    exit(64)
}
let transportName = arguments[arguments.startIndex]
let scenario = arguments[arguments.startIndex + 1]

var client: HTTPClient?
let transport: any HTTPTransport
switch transportName {
case "urlsession":
    transport = URLSessionTransport()
case "asynchttpclient":
    // The setup the documentation recommends for Linux.
    let made = HTTPClient(
        eventLoopGroup: HTTPClient.defaultEventLoopGroup,
        configuration: AsyncHTTPClientTransport.recommendedConfiguration
    )
    client = made
    transport = AsyncHTTPClientTransport(client: made)
default:
    FileHandle.standardError.write(Data("unknown transport \(transportName)\n".utf8))
    exit(64)
}

var interceptors: [any URLTaskInterceptor] = []
switch scenario {
case "resource":
    break
case "token":
    interceptors.append(BearerTokenAuthenticator { _, transport in
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        _ = try await transport.send(request)
        return BearerCredential(accessToken: "unreachable")
    })
default:
    FileHandle.standardError.write(Data("unknown scenario \(scenario)\n".utf8))
    exit(64)
}
interceptors.append(HTTPRetryPolicy())

let manager = URLTaskManager(interceptors: interceptors, transport: transport, timeout: .seconds(60))
let status: Int32
do {
    let (_, response) = try await manager.data(for: URLRequest(url: url))
    print("outcome: status \(response.statusCode)")
    status = 1
} catch {
    print("outcome: \(error)")
    status = 0
}
/// Shuts `client` down (in an async function: at top level the synchronous overload is chosen).
func shutDown(_ client: HTTPClient?) async {
    do {
        try await client?.shutdown()
    } catch {
        print("client shutdown: \(error)")
    }
}

await shutDown(client)
exit(status)
#else
import Foundation

FileHandle.standardError.write(Data("taskkit-http-probe needs the package trait AsyncHTTPClient: swift build --enable-all-traits\n".utf8))
exit(1)
#endif
