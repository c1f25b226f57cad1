#if Examples && AsyncHTTPClient
import Foundation
import TaskKitLoopbackServer
import TaskKitTestSupport
import Testing

@testable import TaskKitHTTP

/// A server that closes the connection in the middle of the response headers, as the resource, as
/// a redirect's target and as the token endpoint, against `taskkit-http-probe` (one request in a
/// process of its own): through the setup the documentation recommends for Linux
/// (`AsyncHTTPClientTransport`), the process sees an error and exits normally. Through
/// `URLSessionTransport` it does too where `URLSession` survives that failure (Apple), and is
/// stopped by FoundationNetworking's `fatalError` where it does not (Linux): the row of the
/// failure table that says why `URLTaskManager()` is deprecated on Linux.
@Suite("A server closing mid-headers cannot stop a process that uses the recommended setup", .serialized)
struct HTTPCloseMidHeadersProcessTests {
    enum Role: String, CaseIterable, CustomTestStringConvertible {
        case resource, redirectTarget = "redirect target", tokenEndpoint = "token endpoint"
        var testDescription: String { rawValue }

        func arguments(_ server: LoopbackServer) -> [String] {
            switch self {
            case .resource:
                ["resource", server.misbehavingURL(.closedMidHeaders).absoluteString]
            case .redirectTarget:
                ["resource", server.keepAliveURL("redirect?to=/keep-alive/closed-mid-headers&status=302").absoluteString]
            case .tokenEndpoint:
                ["token", server.misbehavingURL(.closedMidHeaders).absoluteString]
            }
        }
    }

    static var probe: URL {
        get throws {
            let directory = (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0]))
                .deletingLastPathComponent()
            let url = directory.appendingPathComponent("taskkit-http-probe")
            try #require(
                FileManager.default.isExecutableFile(atPath: url.path),
                "taskkit-http-probe is not built at \(url.path) (swift build --build-tests builds it)"
            )
            return url
        }
    }

    /// Runs the probe, at most 60 s of real time; its termination and output.
    static func run(_ arguments: [String]) async throws -> (reason: Process.TerminationReason, status: Int32, output: String) {
        let process = Process()
        process.executableURL = try probe
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"  // a crash, when expected, is reported quickly
        process.environment = environment
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("taskkit-http-probe-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        defer { try? handle.close() }
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        let exited = await eventually("taskkit-http-probe exits", within: TestDeadline.scaled(.seconds(60)), pollingEvery: .milliseconds(20)) {
            !process.isRunning
        }
        if !exited { process.terminate() }
        process.waitUntilExit()
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        return (process.terminationReason, process.terminationStatus, text)
    }

    @Test("through AsyncHTTPClientTransport the request fails and the process exits normally", .scaledTimeLimit(minutes: 2), arguments: Role.allCases)
    func asyncHTTPClient(_ role: Role) async throws {
        try await withHTTPTestServer { server in
            let (reason, status, output) = try await Self.run(["asynchttpclient"] + role.arguments(server))
            #expect(reason == .exit && status == 0, "\(output)")
            #expect(output.contains("outcome:"), "\(output)")
            if role != .tokenEndpoint {
                #expect(output.contains("networkConnectionLost") || output.contains("-1005"), "\(output)")
            } else {
                #expect(output.contains("refreshFailed"), "\(output)")
            }
        }
    }

    @Test(
        "through URLSessionTransport the process exits normally where URLSession survives it, and is stopped where it does not",
        .scaledTimeLimit(minutes: 2), arguments: Role.allCases
    )
    func urlSession(_ role: Role) async throws {
        try await withHTTPTestServer { server in
            let (reason, status, output) = try await Self.run(["urlsession"] + role.arguments(server))
            if URLSessionTransport.survivesCloseMidHeaders {
                #expect(reason == .exit && status == 0, "\(output)")
            } else {
                #expect(reason == .uncaughtSignal, "FoundationNetworking no longer stops the process: update the failure table and URLTaskManager's Linux deprecation (\(output))")
            }
        }
    }
}
#endif
