#if PostgreSQL
// A process of callers of one `PostgresSingleFlight`, started by the TaskKitPostgres tests (and
// the benchmarks) to exercise single-flight across processes:
//
//   taskkit-postgres-worker --url postgres://user@127.0.0.1:5432/db --table t --executions e \
//       --keys 1 --callers 50 [--key-prefix k] [--lease-ms 30000] [--load-ms 100] \
//       [--first-load-ms 100] [--expire-ms 60000]
//
// Every caller takes keys from one shared list (`k0` … `k<keys - 1>`, in that order) until it is
// empty; with one key, every caller asks for it once. `load` records an execution (key, pid) in
// the executions table, then sleeps `--load-ms` (or `--first-load-ms` when it is the key's first
// execution), and returns the key with the pid. Every caller checks that the value is for its
// key. Prints one line, `calls=N own=N errors=N seconds=S` (`own`: calls answered by this
// process's own load), and exits 0 when every call
// returned a value for its own key, 1 otherwise.
import Foundation
import Logging
import PostgresNIO
import TaskKitPostgres

struct Payload: Codable, Sendable {
    let key: String
    let pid: Int32
}

struct Options {
    var url = ""
    var table = "taskkit_single_flight"
    var executions = "taskkit_executions"
    var keys = 1
    var callers = 50
    var keyPrefix = "k"
    var leaseMilliseconds = 30_000
    var loadMilliseconds = 100
    var firstLoadMilliseconds: Int?
    var expireMilliseconds = 60_000

    init(arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        while let name = iterator.next() {
            guard let value = iterator.next() else { fail("missing value after \(name)") }
            switch name {
            case "--url": url = value
            case "--table": table = value
            case "--executions": executions = value
            case "--keys": keys = Self.int(value, name)
            case "--callers": callers = Self.int(value, name)
            case "--key-prefix": keyPrefix = value
            case "--lease-ms": leaseMilliseconds = Self.int(value, name)
            case "--load-ms": loadMilliseconds = Self.int(value, name)
            case "--first-load-ms": firstLoadMilliseconds = Self.int(value, name)
            case "--expire-ms": expireMilliseconds = Self.int(value, name)
            default: fail("unknown option \(name)")
            }
        }
        if url.isEmpty { fail("--url is required") }
    }

    static func int(_ value: String, _ name: String) -> Int {
        guard let int = Int(value), int >= 0 else { fail("\(name): not a number: \(value)") }
        return int
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("taskkit-postgres-worker: \(message)\n".utf8))
    exit(2)
}

/// `postgres://user[:password]@host:port/database` as a client configuration (no TLS).
func configuration(_ url: String) -> PostgresClient.Configuration {
    guard let components = URLComponents(string: url), let host = components.host,
          let user = components.user
    else { fail("not a postgres:// URL: \(url)") }
    let database = components.path.split(separator: "/").first.map(String.init)
    return PostgresClient.Configuration(
        host: host, port: components.port ?? 5432, username: user, password: components.password,
        database: database, tls: .disable
    )
}

/// The keys left to ask for, shared by the callers.
actor KeyQueue {
    private var next = 0
    private let keys: [String]
    init(_ keys: [String]) { self.keys = keys }
    func take() -> String? {
        guard next < keys.count else { return nil }
        defer { next += 1 }
        return keys[next]
    }
}

let options = Options(arguments: CommandLine.arguments)
let client = PostgresClient(
    configuration: configuration(options.url),
    backgroundLogger: Logger(label: "worker", factory: { _ in SwiftLogNoOpLogHandler() })
)
let pid = getpid()

let exitCode: Int32 = await withTaskGroup(of: Void.self) { group in
    group.addTask { await client.run() }
    defer { group.cancelAll() }

    let flight = PostgresSingleFlight(
        client: client, tableName: options.table, lease: .milliseconds(options.leaseMilliseconds)
    )
    let executions = options.executions
    do {
        try await flight.prepare()
        try await client.query("""
            CREATE TABLE IF NOT EXISTS \(unescaped: executions) (key text NOT NULL, pid integer NOT NULL,
                started_at timestamptz NOT NULL DEFAULT clock_timestamp())
            """)
    } catch {
        // Another worker creating the table at the same time: it exists now.
        if (error as? PSQLError)?.serverInfo?[.sqlState].map({ ["23505", "42710", "42P07"].contains($0) }) != true {
            FileHandle.standardError.write(Data("taskkit-postgres-worker: prepare: \(String(reflecting: error))\n".utf8))
            return 1
        }
    }

    let keys = options.keys == 1 ? Array(repeating: "\(options.keyPrefix)0", count: options.callers)
        : (0..<options.keys).map { "\(options.keyPrefix)\($0)" }
    let queue = KeyQueue(keys)
    let start = ContinuousClock.now
    let (calls, own, errors) = await withTaskGroup(of: (Int, Int, Int).self) { callers in
        for _ in 0..<options.callers {
            callers.addTask {
                var calls = 0, own = 0, errors = 0
                while let key = await queue.take() {
                    calls += 1
                    do {
                        let payload = try await flight.value(
                            forKey: key, resultExpireDuration: .milliseconds(options.expireMilliseconds)
                        ) { () async throws -> Payload in
                            try await client.query("INSERT INTO \(unescaped: executions) (key, pid) VALUES (\(key), \(pid))")
                            var count = 0
                            for try await n in try await client.query(
                                "SELECT count(*) FROM \(unescaped: executions) WHERE key = \(key)"
                            ).decode(Int64.self) { count = Int(n) }
                            let milliseconds = count == 1 ? options.firstLoadMilliseconds ?? options.loadMilliseconds
                                : options.loadMilliseconds
                            try await Task.sleep(for: .milliseconds(milliseconds))
                            return Payload(key: key, pid: pid)
                        }
                        if payload.pid == pid { own += 1 }
                        if payload.key != key {
                            errors += 1
                            FileHandle.standardError.write(Data("taskkit-postgres-worker: \(key) got \(payload.key)\n".utf8))
                        }
                    } catch {
                        errors += 1
                        FileHandle.standardError.write(Data("taskkit-postgres-worker: \(key): \(String(reflecting: error))\n".utf8))
                    }
                }
                return (calls, own, errors)
            }
        }
        var total = (0, 0, 0)
        for await (calls, own, errors) in callers {
            total = (total.0 + calls, total.1 + own, total.2 + errors)
        }
        return total
    }
    let seconds = (ContinuousClock.now - start) / .seconds(1)
    print("calls=\(calls) own=\(own) errors=\(errors) seconds=\(seconds)")
    return errors == 0 ? 0 : 1
}
exit(exitCode)
#else
import Foundation

FileHandle.standardError.write(Data("taskkit-postgres-worker needs the package trait PostgreSQL: swift build --enable-all-traits\n".utf8))
exit(1)
#endif
