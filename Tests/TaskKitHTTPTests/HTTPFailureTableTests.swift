#if Examples
import Foundation
import TaskKit
import TaskKitLoopbackServer
import TaskKitTestSupport
import TaskKitTesting
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TaskKitHTTP

/// One row of the failure table in *Using URLTaskManager*: what a misbehaving server does, the
/// `URLError` code every transport reports for it, and whether ``HTTPRetryPolicy`` retries an
/// idempotent request that failed so.
struct HTTPFailureRow: Sendable, CustomTestStringConvertible {
    let misbehaviour: LoopbackServer.Misbehaviour
    /// `nil`: the client cannot tell the failure from a complete response, which it returns.
    let code: URLError.Code?
    let retried: Bool

    var testDescription: String { misbehaviour.rawValue }

    static let all: [HTTPFailureRow] = [
        HTTPFailureRow(misbehaviour: .closedBeforeReply, code: .networkConnectionLost, retried: true),
        HTTPFailureRow(misbehaviour: .closedMidHeaders, code: .networkConnectionLost, retried: true),
        HTTPFailureRow(misbehaviour: .closedMidBodyWithLength, code: .networkConnectionLost, retried: true),
        HTTPFailureRow(misbehaviour: .closedMidBodyChunked, code: .networkConnectionLost, retried: true),
        HTTPFailureRow(misbehaviour: .closedMidBodyWithoutLength, code: nil, retried: false),
        HTTPFailureRow(misbehaviour: .reset, code: .networkConnectionLost, retried: true),
        HTTPFailureRow(misbehaviour: .garbageStatusLine, code: .cannotParseResponse, retried: false),
        HTTPFailureRow(misbehaviour: .noReply, code: .timedOut, retried: true),
    ]
}

@Suite("The HTTP failure table, row by row, on every transport")
struct HTTPFailureTableTests {
    /// Whether `transport` can run `row` here: FoundationNetworking stops the process on a close
    /// in the middle of the headers (see `URLSessionTransport.survivesCloseMidHeaders`).
    static func runs(_ row: HTTPFailureRow, on transport: HTTPTestTransport) -> Bool {
        row.misbehaviour != .closedMidHeaders || transport != .urlSession || URLSessionTransport.survivesCloseMidHeaders
    }

    @Test(
        "a GET through URLTaskManager and a one-retry HTTPRetryPolicy fails with the row's code, retried as the row says",
        .scaledTimeLimit(minutes: 1),
        arguments: HTTPTestTransport.allCases, HTTPFailureRow.all
    )
    func row(_ transport: HTTPTestTransport, _ row: HTTPFailureRow) async throws {
        guard Self.runs(row, on: transport) else { return }
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let manager = URLTaskManager(
                interceptors: [httpTestRetryPolicy(count: 1)], transport: transport.make(), clock: clock
            )
            var timed = URLRequest(url: server.misbehavingURL(row.misbehaviour))
            // The no-reply row's timeout (whole seconds on Linux); the other rows get a hang guard,
            // scaled for slow runs as every other (`TestDeadline`), so that they fail as themselves.
            timed.timeoutInterval = row.misbehaviour == .noReply ? 1 : 60 * TestDeadline.scale
            let request = timed
            let sending = Task { try await manager.data(for: request) }
            if row.retried {
                #expect(await clock.httpTestAdvanceToNextSleeper() == .seconds(1), "no retry was scheduled")
            }
            let outcome = await Result { try await sending.boundedValue() }
            switch (outcome, row.code) {
            case (.success(let (data, response)), nil):
                #expect(response.statusCode == 200)
                #expect(data == Data("0123456789".utf8))
            case (.failure(let error as URLError), let code?):
                #expect(error.code == code, "got \(error)")
                #expect(error.failingURL == request.url)
            default:
                Issue.record("expected \(String(describing: row.code)), got \(outcome)")
            }
            #expect(await server.hits(.misbehaving) == (row.retried ? 2 : 1))
            #expect(clock.totalSleeps == (row.retried ? 1 : 0))
        }
    }

    @Test("a POST that fails as a retried row is not retried by default", arguments: HTTPTestTransport.allCases)
    func postIsNotRetried(_ transport: HTTPTestTransport) async throws {
        try await withHTTPTestServer { server in
            let clock = ManualClock()
            let manager = URLTaskManager(
                interceptors: [httpTestRetryPolicy(count: 1)], transport: transport.make(), clock: clock
            )
            var request = URLRequest(url: server.misbehavingURL(.reset))
            request.httpMethod = "POST"
            let error = await #expect(throws: URLError.self) { _ = try await manager.data(for: request) }
            #expect(error?.code == .networkConnectionLost)
            #expect(await server.hits(.misbehaving) == 1)
        }
    }
}

extension Result where Failure == any Error {
    /// The result of `body`.
    init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
#endif
