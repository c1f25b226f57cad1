#if Examples
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TaskKitHTTP
import TaskKitLoopbackServer

/// One demonstration: a name, a title, and the work that returns checked observations.
struct Scenario: Sendable {
    let name: String
    let title: String
    let body: @Sendable (DemoContext, inout ScenarioRecorder) async throws -> Void

    static let all: [Scenario] = [
        .monoTask, .keyedMonoTask, .batchLoading, .taskStore, .coFuture, .taskManager, .urlTaskManager, .coalescing,
    ]

    func execute(_ context: DemoContext) async -> ScenarioReport {
        var recorder = ScenarioRecorder()
        let start = ContinuousClock.now
        do {
            try await body(context, &recorder)
        } catch {
            recorder.check("finished without an unexpected error", expected: "no error", actual: "\(error)", passed: false)
        }
        let elapsed = start.duration(to: .now)
        return ScenarioReport(
            name: name, title: title, seconds: elapsed.seconds,
            checks: recorder.checks, measurements: recorder.measurements, comparisons: recorder.comparisons
        )
    }
}

/// Everything a scenario may use.
struct DemoContext: Sendable {
    let server: LoopbackServer
    let console: Console

    /// The session of plain requests. Not `URLSession.shared`: its `URLCache` makes cancelling a
    /// request trap in FoundationNetworking on Linux (see `URLSessionTransport.defaultConfiguration`),
    /// and the scenarios cancel requests on purpose.
    static let session = URLSession(configuration: URLSessionTransport.defaultConfiguration)

    /// A plain GET (or POST) against the loopback server.
    func fetch(_ path: String, method: String = "GET", body: Data? = nil) async throws -> (Data, HTTPURLResponse) {
        var request = URLRequest(url: server.url(path))
        request.httpMethod = method
        request.httpBody = body
        let (data, response) = try await Self.session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        return (data, http)
    }
}

/// Collects checks and measurements while a scenario runs.
struct ScenarioRecorder: Sendable {
    private(set) var checks: [ScenarioReport.Check] = []
    private(set) var measurements: [ScenarioReport.Measurement] = []
    private(set) var comparisons: [Comparison] = []

    mutating func check(_ what: String, expected: String, actual: String, passed: Bool) {
        checks.append(.init(what: what, expected: expected, actual: actual, passed: passed))
    }

    mutating func expect<T: Equatable & CustomStringConvertible>(_ what: String, _ actual: T, equals expected: T) {
        check(what, expected: expected.description, actual: actual.description, passed: actual == expected)
    }

    mutating func expect<T: Comparable & CustomStringConvertible>(_ what: String, _ actual: T, atMost limit: T) {
        check(what, expected: "<= \(limit)", actual: actual.description, passed: actual <= limit)
    }

    mutating func expect<T: Comparable & CustomStringConvertible>(_ what: String, _ actual: T, atLeast limit: T) {
        check(what, expected: ">= \(limit)", actual: actual.description, passed: actual >= limit)
    }

    mutating func measure(_ what: String, _ value: String) {
        measurements.append(.init(what: what, value: value))
    }

    /// Records the same workload run the naive way and through TaskKit, and checks that TaskKit
    /// needed fewer upstream requests (or handled fewer results).
    mutating func compare(
        _ scenario: String, workload: String, counted: String, naive: Comparison.Run, taskKit: Comparison.Run
    ) {
        comparisons.append(
            Comparison(scenario: scenario, workload: workload, counted: counted, naive: naive, taskKit: taskKit)
        )
        check(
            "\(workload): \(counted) through TaskKit, against \(naive.count) the naive way",
            expected: "< \(naive.count)", actual: "\(taskKit.count)",
            passed: taskKit.count < naive.count
        )
    }
}

/// The outcome of one scenario.
struct ScenarioReport: Codable, Sendable {
    struct Check: Codable, Sendable {
        let what: String
        let expected: String
        let actual: String
        let passed: Bool
    }

    struct Measurement: Codable, Sendable {
        let what: String
        let value: String
    }

    let name: String
    let title: String
    let seconds: Double
    let checks: [Check]
    let measurements: [Measurement]
    let comparisons: [Comparison]

    var passed: Bool { !checks.isEmpty && checks.allSatisfy(\.passed) }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    var milliseconds: String { String(format: "%.0f ms", seconds * 1000) }
}
#endif
