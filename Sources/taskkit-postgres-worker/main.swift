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
//
// With `--mode fleet` it is instead one replica of a `PostgresFleetCache` (see `runFleet`):
//
//   taskkit-postgres-worker --mode fleet --url URL --table t --executions e --source s --keys 1000 \
//       --target-version 2 --start-file PATH [--concurrency 16] [--deadline-ms 60000] [--poll-ms N]
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
    var mode = "single-flight"
    var source = ""
    var targetVersion = 2
    var startFile = ""
    var concurrency = 16
    var deadlineMilliseconds = 60_000
    var pollMilliseconds: Int?

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
            case "--mode": mode = value
            case "--source": source = value
            case "--target-version": targetVersion = Self.int(value, name)
            case "--start-file": startFile = value
            case "--concurrency": concurrency = Self.int(value, name)
            case "--deadline-ms": deadlineMilliseconds = Self.int(value, name)
            case "--poll-ms": pollMilliseconds = Self.int(value, name)
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
var clientConfiguration = configuration(options.url)
// Eight replicas and the test's clients stay under the test server's 200 connections.
clientConfiguration.options.maximumConnections = 12
let client = PostgresClient(
    configuration: clientConfiguration,
    backgroundLogger: Logger(label: "worker", factory: { _ in SwiftLogNoOpLogHandler() })
)
let pid = getpid()

/// Writes `line` to standard output at once (it is a file the test reads while this runs).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// One replica of a `PostgresFleetCache` of `--keys` keys over the table `--table`, loading a
/// key's version from the table `--source` (`key text, version integer`) and recording each load
/// in `--executions`:
/// 1. listens (`run()`), reads every key once (the fleet loads each once), prints `ready`;
/// 2. reads every key again and again (`--concurrency` callers) until each has served
///    `--target-version`, noting when each first did;
/// 3. waits for `--start-file`, where the test wrote (as seconds since 1970) when it began the
///    invalidation, and prints `fleet seen=N latencies_ms=a,b,…` (one per key, from that time)
///    `delivered_ms=D` (when every key's invalidation had arrived) and `stale_after_start=N`: 0 unless a key served the old version after it first served
///    the new one.
func runFleet(client: PostgresClient) async -> Int32 {
    let source = options.source
    let executions = options.executions
    let cache = PostgresFleetCache<String>(
        client: client, tableName: options.table,
        invalidation: options.pollMilliseconds.map { .polling(every: .milliseconds($0)) } ?? .listen,
        maximumEntries: 2 * options.keys
    ) { key in
        try await client.query("INSERT INTO \(unescaped: executions) (key, pid) VALUES (\(key), \(pid))")
        var version = 0
        for try await v in try await client.query(
            "SELECT version FROM \(unescaped: source) WHERE key = \(key)"
        ).decode(Int.self) { version = v }
        return "\(version)"
    }
    return await withTaskGroup(of: Void.self) { group in
        group.addTask { await cache.run() }
        defer { group.cancelAll() }
        let deadline = ContinuousClock.now + .milliseconds(options.deadlineMilliseconds)
        while !cache.isReceivingInvalidations {
            guard ContinuousClock.now < deadline else { say("fleet error=not-listening"); return 1 }
            try? await Task.sleep(for: .milliseconds(5))
        }
        let keys = (0..<options.keys).map { "\(options.keyPrefix)\($0)" }
        let target = "\(options.targetVersion)"
        /// Reads `keys` with `concurrency` callers; returns, per key read at the target version,
        /// when (seconds since 1970), and how many reads served an older version after the key
        /// was first seen at the target.
        @Sendable func pass(_ keys: [String], seen: [String: Double]) async -> (seen: [String: Double], stale: Int, errors: Int) {
            let queue = KeyQueue(keys)
            return await withTaskGroup(of: ([String: Double], Int, Int).self) { callers in
                for _ in 0..<max(1, options.concurrency) {
                    callers.addTask {
                        var found: [String: Double] = [:]
                        var stale = 0, errors = 0
                        while let key = await queue.take() {
                            do {
                                let value = try await cache.value(forKey: key)
                                if value == target {
                                    found[key] = Date().timeIntervalSince1970
                                } else if seen[key] != nil {
                                    stale += 1
                                }
                            } catch {
                                errors += 1
                                FileHandle.standardError.write(Data("taskkit-postgres-worker: \(key): \(String(reflecting: error))\n".utf8))
                            }
                        }
                        return (found, stale, errors)
                    }
                }
                var all = seen, stale = 0, errors = 0
                for await (found, s, e) in callers {
                    for (key, at) in found where all[key] == nil { all[key] = at }
                    stale += s
                    errors += e
                }
                return (all, stale, errors)
            }
        }
        let warm = await pass(keys, seen: [:])
        guard warm.errors == 0 else { say("fleet error=warm-up"); return 1 }
        say("ready")
        // When the invalidations of every key have arrived (sampled every millisecond).
        let delivered = Task { () -> Double? in
            while !Task.isCancelled {
                if cache.counters.keysInvalidated >= options.keys { return Date().timeIntervalSince1970 }
                try? await Task.sleep(for: .milliseconds(1))
            }
            return nil
        }
        var seen: [String: Double] = [:]
        var stale = 0
        var errors = 0
        while seen.count < keys.count, ContinuousClock.now < deadline {
            let result = await pass(keys.filter { seen[$0] == nil }, seen: seen)
            seen = result.seen
            stale += result.stale
            errors += result.errors
            if seen.count < keys.count { try? await Task.sleep(for: .milliseconds(1)) }
        }
        // One more pass over every key: none may serve the old version again.
        let check = await pass(keys, seen: seen)
        stale += check.stale
        var start: Double?
        while start == nil, ContinuousClock.now < deadline {
            start = (try? String(contentsOfFile: options.startFile, encoding: .utf8))
                .flatMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            if start == nil { try? await Task.sleep(for: .milliseconds(5)) }
        }
        guard let start else { say("fleet error=no-start-file"); return 1 }
        delivered.cancel()
        let deliveredMilliseconds = await delivered.value.map { String(format: "%.1f", ($0 - start) * 1_000) } ?? "none"
        let latencies = seen.values.map { String(format: "%.1f", ($0 - start) * 1_000) }
        say("fleet seen=\(seen.count) stale_after_start=\(stale) errors=\(errors) resyncs=\(cache.counters.resyncs) delivered_ms=\(deliveredMilliseconds) latencies_ms=\(latencies.joined(separator: ","))")
        return seen.count == keys.count && stale == 0 && errors == 0 ? 0 : 1
    }
}

let exitCode: Int32 = await withTaskGroup(of: Void.self) { group in
    group.addTask { await client.run() }
    defer { group.cancelAll() }
    if options.mode == "fleet" { return await runFleet(client: client) }

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
