#if PostgreSQL
import Foundation
import Logging
import PostgresNIO
import Testing
import TaskKitPostgres

/// The PostgreSQL server the tests use: `TASKKIT_POSTGRES_URL` (set by `scripts/with-postgres`).
/// Without it the tests are skipped, unless `TASKKIT_POSTGRES_REQUIRED=1` (CI), where they fail.
enum PostgresTestServer {
    static let url = ProcessInfo.processInfo.environment["TASKKIT_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    /// The same database through pgbouncer in transaction-pooling mode, when available.
    static let poolerURL = ProcessInfo.processInfo.environment["TASKKIT_POSTGRES_POOLER_URL"]
        .flatMap { $0.isEmpty ? nil : $0 }
    static let required = ProcessInfo.processInfo.environment["TASKKIT_POSTGRES_REQUIRED"] == "1"

    /// Enabled when a server is configured, or required (then a missing server fails the test).
    static let enabled = url != nil || required
    static let skipMessage: Comment = """
        no PostgreSQL server: TASKKIT_POSTGRES_URL is not set. \
        Run `scripts/with-postgres swift test --filter TaskKitPostgresTests`
        """

    static func configuration(_ url: String) throws -> PostgresClient.Configuration {
        let components = try #require(URLComponents(string: url))
        return PostgresClient.Configuration(
            host: try #require(components.host), port: components.port ?? 5432,
            username: try #require(components.user), password: components.password,
            database: components.path.split(separator: "/").first.map(String.init), tls: .disable
        )
    }

    /// Runs `body` with a running client for the server (or the pooler).
    static func withClient<Result: Sendable>(
        pooler: Bool = false,
        _ body: @Sendable (PostgresClient) async throws -> Result
    ) async throws -> Result {
        let url = try #require(pooler ? poolerURL : self.url, "TASKKIT_POSTGRES_URL is required (TASKKIT_POSTGRES_REQUIRED=1)")
        let client = PostgresClient(
            configuration: try configuration(url),
            backgroundLogger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            return try await body(client)
        }
    }

    /// A table name no other test uses.
    static func uniqueName(_ prefix: String) -> String {
        "\(prefix)_\(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(12).lowercased())"
    }

    /// How many loads each key had, from a worker executions table.
    static func executions(_ client: PostgresClient, table: String) async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for try await (key, count) in try await client.query(
            "SELECT key, count(*) FROM \(unescaped: table) GROUP BY key"
        ).decode((String, Int64).self) {
            counts[key] = Int(count)
        }
        return counts
    }
}

/// A `taskkit-postgres-worker` process (built beside the test bundle).
final class WorkerProcess: Sendable {
    let process: Process
    let output: URL

    static var executable: URL {
        get throws {
            let directory = (Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0]))
                .deletingLastPathComponent()
            let url = directory.appendingPathComponent("taskkit-postgres-worker")
            try #require(FileManager.default.isExecutableFile(atPath: url.path),
                         "taskkit-postgres-worker is not built at \(url.path) (swift build --build-tests builds it)")
            return url
        }
    }

    init(arguments: [String]) throws {
        process = Process()
        process.executableURL = try Self.executable
        process.arguments = arguments
        output = FileManager.default.temporaryDirectory.appendingPathComponent("taskkit-worker-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    var log: String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }

    func kill() {
        if process.isRunning { _ = Foundation.kill(process.processIdentifier, SIGKILL) }
    }

    deinit { try? FileManager.default.removeItem(at: output) }
}

/// Waits until every process has exited, at most `timeout`; kills the ones still running then.
/// Returns whether they all exited in time.
func waitForExit(_ workers: [WorkerProcess], timeout: Duration) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if workers.allSatisfy({ !$0.process.isRunning }) { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    let done = workers.allSatisfy { !$0.process.isRunning }
    for worker in workers { worker.kill() }
    // Reaped before returning: reading `terminationStatus` of a running process stops the caller.
    let reaped = ContinuousClock.now + .seconds(10)
    while workers.contains(where: \.process.isRunning), ContinuousClock.now < reaped {
        try? await Task.sleep(for: .milliseconds(20))
    }
    return done
}
#endif
