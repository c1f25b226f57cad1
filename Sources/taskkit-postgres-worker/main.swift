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
//       --target-version 2 --times-file PATH [--concurrency 4] [--deadline-ms 60000] [--poll-ms N]
//
// or, with `--reads N`, N callers that each read `<key-prefix>0` once (see `runFleetReads`):
//
//   taskkit-postgres-worker --mode fleet --url URL --table t --executions e --source s --reads 50 \
//       --target-version 1 [--lease-ms 30000] [--load-ms 0] [--first-load-ms N]
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
    /// `--load-ms`: 100 by default in the single-flight mode, 0 in the fleet mode.
    var loadMilliseconds: Int?
    var firstLoadMilliseconds: Int?
    var expireMilliseconds = 60_000
    var mode = "single-flight"
    var source = ""
    var targetVersion = 2
    var timesFile = ""
    var concurrency = 4
    var deadlineMilliseconds = 60_000
    var pollMilliseconds: Int?
    var reads: Int?

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
            case "--times-file": timesFile = value
            case "--concurrency": concurrency = Self.int(value, name)
            case "--deadline-ms": deadlineMilliseconds = Self.int(value, name)
            case "--poll-ms": pollMilliseconds = Self.int(value, name)
            case "--reads": reads = Self.int(value, name)
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

/// Times noted by a replica's tasks, per key index (seconds since 1970).
///
/// `@unchecked Sendable`: every stored property is read and written only inside `lock`.
final class KeyTimes: @unchecked Sendable {
    private let lock = NSLock()
    private var times: [Double?]
    init(count: Int) { times = Array(repeating: nil, count: count) }
    subscript(index: Int) -> Double? {
        lock.lock(); defer { lock.unlock() }
        return times[index]
    }
    /// Notes `time` for `index` unless a time is already noted; returns whether it was noted.
    @discardableResult
    func note(_ index: Int, at time: Double) -> Bool {
        lock.lock(); defer { lock.unlock() }
        guard times[index] == nil else { return false }
        times[index] = time
        return true
    }
    var all: [Double?] {
        lock.lock(); defer { lock.unlock() }
        return times
    }
}

/// One replica of a `PostgresFleetCache` of `--keys` keys (`k0` … `k<keys - 1>`) over the table
/// `--table`, loading a key's version from the table `--source` (`key text, version integer`)
/// and recording each load in `--executions`:
/// 1. listens (`run()`), reads every key once (the fleet loads each once), prints `ready`;
/// 2. while the test invalidates the keys in order (one by one or in small batches), notes when
///    each key's invalidation was applied here: the count of keys invalidated by other processes
///    (`counters.keysInvalidated`, sampled every millisecond) reaching the key's index + 1;
/// 3. meanwhile `--concurrency` readers read the keys not yet seen at `--target-version` again
///    and again (10 ms apart), noting when each first served it, and counting a read
///    that began after the key's invalidation was applied and still served an older version;
/// 4. reads every key once more (each must serve the target version), waits for `--times-file`,
///    where the test wrote, per key, when its `invalidate` returned (seconds since 1970, comma
///    separated), and prints `fleet seen=N stale=N errors=N resyncs=N visible_ms=a,b,…`
///    (per key, from `invalidate` returning to the invalidation applied here) `read_ms=a,b,…`
///    (to this replica's first read of the new value).
/// `key`'s version in the `--source` table, as a fleet replica loads it.
func sourceVersion(_ client: PostgresClient, source: String, key: String) async throws -> String {
    var version = 0
    for try await v in try await client.query(
        "SELECT version FROM \(unescaped: source) WHERE key = \(key)"
    ).decode(Int.self) { version = v }
    return "\(version)"
}

/// Waits, until `deadline`, for `cache` to receive invalidations; says
/// `fleet error=not-listening` and returns `false` if it does not.
func receivesInvalidations(_ cache: PostgresFleetCache<String>, by deadline: ContinuousClock.Instant) async -> Bool {
    while !cache.isReceivingInvalidations {
        guard ContinuousClock.now < deadline else {
            say("fleet error=not-listening")
            return false
        }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return true
}

func runFleet(client: PostgresClient) async -> Int32 {
    let source = options.source
    let executions = options.executions
    let cache = PostgresFleetCache<String>(
        client: client, tableName: options.table,
        invalidation: options.pollMilliseconds.map { .polling(every: .milliseconds($0)) } ?? .listen,
        maximumEntries: 2 * options.keys
    ) { key in
        try await client.query("INSERT INTO \(unescaped: executions) (key, pid) VALUES (\(key), \(pid))")
        return try await sourceVersion(client, source: source, key: key)
    }
    return await withTaskGroup(of: Void.self) { group in
        group.addTask { await cache.run() }
        defer { group.cancelAll() }
        let deadline = ContinuousClock.now + .milliseconds(options.deadlineMilliseconds)
        guard await receivesInvalidations(cache, by: deadline) else { return 1 }
        let count = options.keys
        let keys = (0..<count).map { "\(options.keyPrefix)\($0)" }
        let target = "\(options.targetVersion)"
        let concurrency = max(1, options.concurrency)
        let warmErrors = await withTaskGroup(of: Int.self) { readers in
            for reader in 0..<concurrency {
                readers.addTask {
                    var errors = 0
                    for index in stride(from: reader, to: count, by: concurrency) {
                        do { _ = try await cache.value(forKey: keys[index]) } catch { errors += 1 }
                    }
                    return errors
                }
            }
            return await readers.reduce(0, +)
        }
        guard warmErrors == 0 else { say("fleet error=warm-up"); return 1 }
        let applied = KeyTimes(count: count), seen = KeyTimes(count: count)
        say("ready")
        let watcher = Task {
            var noted = 0
            while noted < count, ContinuousClock.now < deadline {
                let invalidated = min(cache.counters.keysInvalidated, count)
                if invalidated > noted {
                    let now = Date().timeIntervalSince1970
                    for index in noted..<invalidated { applied.note(index, at: now) }
                    noted = invalidated
                }
                try? await Task.sleep(for: .milliseconds(1))
            }
        }
        let (stale, errors) = await withTaskGroup(of: (Int, Int).self) { readers in
            for reader in 0..<concurrency {
                readers.addTask {
                    var pending = Array(stride(from: reader, to: count, by: concurrency))
                    var stale = 0, errors = 0
                    while !pending.isEmpty, ContinuousClock.now < deadline {
                        var left: [Int] = []
                        for index in pending {
                            let began = Date().timeIntervalSince1970
                            do {
                                let value = try await cache.value(forKey: keys[index])
                                if value == target {
                                    seen.note(index, at: Date().timeIntervalSince1970)
                                    continue
                                }
                                if let at = applied[index], at < began { stale += 1 }
                            } catch {
                                errors += 1
                                FileHandle.standardError.write(Data("taskkit-postgres-worker: \(keys[index]): \(String(reflecting: error))\n".utf8))
                            }
                            left.append(index)
                        }
                        pending = left
                        if !pending.isEmpty { try? await Task.sleep(for: .milliseconds(10)) }
                    }
                    return (stale, errors)
                }
            }
            var total = (0, 0)
            for await (s, e) in readers { total = (total.0 + s, total.1 + e) }
            return total
        }
        await watcher.value
        // Once more, every key: none may serve an older version again.
        var finalStale = 0
        for (index, key) in keys.enumerated() where applied[index] != nil {
            if (try? await cache.value(forKey: key)) != target { finalStale += 1 }
        }
        var returned: [Double]?
        let timesDeadline = ContinuousClock.now + .seconds(30)
        while returned == nil, ContinuousClock.now < timesDeadline {
            returned = (try? String(contentsOfFile: options.timesFile, encoding: .utf8))
                .map { $0.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",").compactMap { Double($0) } }
                .flatMap { $0.count == count ? $0 : nil }
            if returned == nil { try? await Task.sleep(for: .milliseconds(5)) }
        }
        guard let returned else { say("fleet error=no-times-file"); return 1 }
        func milliseconds(_ times: KeyTimes) -> String {
            zip(times.all, returned).compactMap { time, end in
                time.map { String(format: "%.1f", ($0 - end) * 1_000) }
            }.joined(separator: ",")
        }
        let seenCount = seen.all.compactMap { $0 }.count
        let appliedCount = applied.all.compactMap { $0 }.count
        let resyncs = cache.counters.resyncs
        say("fleet seen=\(seenCount) applied=\(appliedCount) stale=\(stale + finalStale) errors=\(errors) resyncs=\(resyncs) visible_ms=\(milliseconds(applied)) read_ms=\(milliseconds(seen))")
        return seenCount == count && appliedCount == count && stale + finalStale == 0 && errors == 0 && resyncs == 0 ? 0 : 1
    }
}

/// `--mode fleet --reads N`: one replica of a `PostgresFleetCache` (lease `--lease-ms`) whose
/// `load` records an execution (key, pid) in `--executions`, sleeps `--first-load-ms` when it is
/// the key's first execution in the fleet (else `--load-ms`, default 0), and returns the key's
/// version from `--source`. Once it listens, N concurrent callers each read `<key-prefix>0` once
/// and check that it is `--target-version` (give it: its default, 2, is the other scenario's). Prints `fleet reads=N values=N errors=N`
/// and exits 0 when every read returned that value.
func runFleetReads(client: PostgresClient) async -> Int32 {
    let source = options.source
    let executions = options.executions
    let cache = PostgresFleetCache<String>(
        client: client, tableName: options.table,
        invalidation: options.pollMilliseconds.map { .polling(every: .milliseconds($0)) } ?? .listen,
        lease: .milliseconds(options.leaseMilliseconds)
    ) { key in
        try await client.query("INSERT INTO \(unescaped: executions) (key, pid) VALUES (\(key), \(pid))")
        var count = 0
        for try await n in try await client.query(
            "SELECT count(*) FROM \(unescaped: executions) WHERE key = \(key)"
        ).decode(Int64.self) { count = Int(n) }
        let load = options.loadMilliseconds ?? 0
        let milliseconds = count == 1 ? options.firstLoadMilliseconds ?? load : load
        if milliseconds > 0 { try await Task.sleep(for: .milliseconds(milliseconds)) }
        return try await sourceVersion(client, source: source, key: key)
    }
    return await withTaskGroup(of: Void.self) { group in
        group.addTask { await cache.run() }
        defer { group.cancelAll() }
        let deadline = ContinuousClock.now + .milliseconds(options.deadlineMilliseconds)
        guard await receivesInvalidations(cache, by: deadline) else { return 1 }
        let key = "\(options.keyPrefix)0"
        let target = "\(options.targetVersion)"
        let reads = options.reads ?? 0
        let (values, errors) = await withTaskGroup(of: (Int, Int).self) { callers in
            for _ in 0..<reads {
                callers.addTask {
                    do {
                        let value = try await cache.value(forKey: key)
                        if value == target { return (1, 0) }
                        say("taskkit-postgres-worker: \(key) = \(value), not \(target)")
                        return (0, 1)
                    } catch {
                        say("taskkit-postgres-worker: \(key): \(String(reflecting: error))")
                        return (0, 1)
                    }
                }
            }
            var total = (0, 0)
            for await (v, e) in callers { total = (total.0 + v, total.1 + e) }
            return total
        }
        say("fleet reads=\(reads) values=\(values) errors=\(errors)")
        return values == reads && errors == 0 ? 0 : 1
    }
}

let exitCode: Int32 = await withTaskGroup(of: Void.self) { group in
    group.addTask { await client.run() }
    defer { group.cancelAll() }
    if options.mode == "fleet" {
        return options.reads == nil ? await runFleet(client: client) : await runFleetReads(client: client)
    }

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
                            let load = options.loadMilliseconds ?? 100
                            let milliseconds = count == 1 ? options.firstLoadMilliseconds ?? load : load
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
