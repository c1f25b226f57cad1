// PostgresSingleFlight throughput with 8 processes: each process (a copy of this executable)
// asks for the same N distinct keys, in the same order, with 50 concurrent callers; every key is
// loaded once in the fleet (its load returns at once) and the 7 other processes get the stored
// result. Reports distinct keys per second (N / wall time of the slowest process) and checks
// that each key was loaded exactly once. Needs TASKKIT_POSTGRES_URL:
//
//   ../scripts/with-postgres swift run -c release PostgresThroughput [keys, default 5000]
import Foundation
import Logging
import PostgresNIO
import TaskKitPostgres

let processes = 8
let callersPerProcess = 50

guard let url = ProcessInfo.processInfo.environment["TASKKIT_POSTGRES_URL"], !url.isEmpty,
      let components = URLComponents(string: url), let host = components.host, let user = components.user
else {
    print("PostgresThroughput: TASKKIT_POSTGRES_URL is not set. Run: ../scripts/with-postgres swift run -c release PostgresThroughput")
    exit(2)
}

func makeClient() -> PostgresClient {
    PostgresClient(
        configuration: .init(
            host: host, port: components.port ?? 5432, username: user, password: components.password,
            database: components.path.split(separator: "/").first.map(String.init), tls: .disable
        ),
        backgroundLogger: Logger(label: "throughput", factory: { _ in SwiftLogNoOpLogHandler() })
    )
}

func withClient<Result: Sendable>(_ body: @Sendable (PostgresClient) async throws -> Result) async throws -> Result {
    let client = makeClient()
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await client.run() }
        defer { group.cancelAll() }
        return try await body(client)
    }
}

actor KeyQueue {
    private var next = 0
    let count: Int
    init(count: Int) { self.count = count }
    func take() -> Int? {
        guard next < count else { return nil }
        defer { next += 1 }
        return next
    }
}

let arguments = CommandLine.arguments
if arguments.count >= 5, arguments[1] == "--child" {
    // A child: --child TABLE EXECUTIONS KEYS. Prints its wall time in seconds.
    let (table, executions, keys) = (arguments[2], arguments[3], Int(arguments[4])!)
    let seconds = try await withClient { client in
        let flight = PostgresSingleFlight(client: client, tableName: table)
        let queue = KeyQueue(count: keys)
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<callersPerProcess {
                group.addTask {
                    while let index = await queue.take() {
                        let key = "throughput/\(index)"
                        let value = try await flight.value(forKey: key, resultExpireDuration: .seconds(3_600)) {
                            try await client.query("INSERT INTO \(unescaped: executions) (key) VALUES (\(key))")
                            return index
                        }
                        precondition(value == index)
                    }
                }
            }
            try await group.waitForAll()
        }
        return (ContinuousClock.now - start) / .seconds(1)
    }
    print(seconds)
    exit(0)
}

let keys = arguments.count > 1 ? Int(arguments[1]) ?? 5_000 : 5_000
let table = "taskkit_throughput_\(getpid())"
let executions = "taskkit_throughput_executions_\(getpid())"
try await withClient { client in
    try await PostgresSingleFlight(client: client, tableName: table).prepare()
    try await client.query("CREATE TABLE \(unescaped: executions) (key text NOT NULL)")
}
let start = ContinuousClock.now
let children = try (0..<processes).map { _ in
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
    process.arguments = ["--child", table, executions, "\(keys)"]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    return (process, output)
}
var childSeconds: [Double] = []
for (process, output) in children {
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0,
          let seconds = Double(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    else {
        print("PostgresThroughput: a child failed (status \(process.terminationStatus))")
        exit(1)
    }
    childSeconds.append(seconds)
}
let wall = (ContinuousClock.now - start) / .seconds(1)
let (loaded, distinct) = try await withClient { client -> (Int, Int) in
    var result = (0, 0)
    for try await (count, distinct) in try await client.query(
        "SELECT count(*), count(DISTINCT key) FROM \(unescaped: executions)"
    ).decode((Int64, Int64).self) {
        result = (Int(count), Int(distinct))
    }
    try await client.query("DROP TABLE \(unescaped: executions)")
    try await client.query("DROP TABLE \(unescaped: table)")
    return result
}
let slowest = childSeconds.max() ?? wall
print("""
    PostgresThroughput: \(processes) processes x \(callersPerProcess) callers, \(keys) distinct keys each \
    (\(processes * keys) calls): slowest process \(String(format: "%.2f", slowest)) s \
    (wall with process start \(String(format: "%.2f", wall)) s); \
    \(String(format: "%.0f", Double(keys) / slowest)) distinct keys/s, \
    \(String(format: "%.0f", Double(processes * keys) / slowest)) calls/s; \
    loads \(loaded) for \(distinct) keys (\(loaded == keys && distinct == keys ? "each once" : "NOT each once"))
    """)
exit(loaded == keys && distinct == keys ? 0 : 1)
