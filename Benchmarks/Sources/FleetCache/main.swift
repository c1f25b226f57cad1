// PostgresFleetCache against its peers (issue 49, "Measured"). Needs TASKKIT_POSTGRES_URL:
//
//   ../scripts/with-postgres swift run -c release FleetCache [rounds, default 5] [keys, default 300]
//
// a. L1 hit: `PostgresFleetCache.value(forKey:)` on a warm key (the cache listening) against a
//    plain `KeyedMonoTask<String, String>` hit (same key, same 64-byte value, same bound and
//    expiry): ns per read, one caller and 4 concurrent readers. Bar: ≤ 1.2x.
// b. L2 hit: a key not in the local tier whose row is stored (a fresh cache per round reads 2,000
//    stored keys once each) against a plain `SELECT value FROM <table> WHERE key_hash = $1` of
//    the same rows on the same `PostgresClient` (decoded to bytes, no JSON): µs per read, one
//    caller. Bar: ≤ 1.2x. Also `PostgresSingleFlight` alone on the same rows (the shared tier
//    without the local one), to tell the fleet layer's cost from the single flight's, and the
//    hand-written two tiers (a `KeyedMonoTask` whose load is the plain `SELECT`).
// c. Invalidation-to-visibility with 8 processes (copies of this executable, `--child`): each
//    warms `keys` keys, then notes when the count of keys other processes invalidated
//    (`counters.keysInvalidated`, sampled every millisecond) reaches each key's index + 1; this
//    process invalidates the keys one at a time, 10 ms apart, noting when each `invalidate`
//    returned. p50 / p99 / max of (applied - returned), over 8 x keys samples; LISTEN, then
//    polling every 100 ms. Bar: LISTEN p99 ≤ 250 ms on loopback.
//
// Rounds alternate the contenders (and which goes first); each figure is the median of the
// rounds, the ratio the median of the per-round ratios.
import Foundation
import Logging
import PostgresNIO
import TaskKit
import TaskKitPostgres

guard let url = ProcessInfo.processInfo.environment["TASKKIT_POSTGRES_URL"], !url.isEmpty,
      let components = URLComponents(string: url), let host = components.host, let user = components.user
else {
    print("FleetCache: TASKKIT_POSTGRES_URL is not set. Run: ../scripts/with-postgres swift run -c release FleetCache")
    exit(2)
}

func makeClient() -> PostgresClient {
    var configuration = PostgresClient.Configuration(
        host: host, port: components.port ?? 5432, username: user, password: components.password,
        database: components.path.split(separator: "/").first.map(String.init), tls: .disable
    )
    configuration.options.maximumConnections = 8
    return PostgresClient(
        configuration: configuration,
        backgroundLogger: Logger(label: "fleet-cache", factory: { _ in SwiftLogNoOpLogHandler() })
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

/// The figures' helpers (static, so the `@Sendable` closures below can call them).
enum Measure {
    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
    }

    static func format(_ value: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", value) }

    /// The nanoseconds per read of `reads` reads spread over `readers` concurrent tasks.
    static func nanosecondsPerRead(
        readers: Int, reads: Int, _ read: @escaping @Sendable () async throws -> Void
    ) async throws -> Double {
        let perReader = reads / readers
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<readers {
                group.addTask {
                    for _ in 0..<perReader { try await read() }
                }
            }
            try await group.waitForAll()
        }
        return (ContinuousClock.now - start) / .nanoseconds(1) / Double(perReader * readers)
    }
}

let value64 = String(repeating: "v", count: 64)

// MARK: - Child (part c)

let arguments = CommandLine.arguments
if arguments.count >= 7, arguments[1] == "--child" {
    // --child TABLE KEYS POLL_MS(0 = LISTEN) DIRECTORY INDEX: writes DIRECTORY/ready-INDEX once
    // warm and listening; prints the applied times (seconds since 1970), comma separated.
    let (table, keys, pollMilliseconds, directory, index) =
        (arguments[2], Int(arguments[3])!, Int(arguments[4])!, arguments[5], arguments[6])
    let line = try await withClient { client -> String in
        let cache = PostgresFleetCache<String>(
            client: client, tableName: table,
            invalidation: pollMilliseconds == 0 ? .listen : .polling(every: .milliseconds(pollMilliseconds)),
            maximumEntries: 2 * keys
        ) { _ in value64 }
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await cache.run() }
            defer { group.cancelAll() }
            let deadline = ContinuousClock.now + .seconds(60)
            while !cache.isReceivingInvalidations, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            for key in 0..<keys { _ = try await cache.value(forKey: "k\(key)") }
            _ = FileManager.default.createFile(atPath: "\(directory)/ready-\(index)", contents: nil)
            var applied = [Double](repeating: .nan, count: keys)
            var noted = 0
            while noted < keys, ContinuousClock.now < deadline {
                let invalidated = min(cache.counters.keysInvalidated, keys)
                if invalidated > noted {
                    let now = Date().timeIntervalSince1970
                    for key in noted..<invalidated { applied[key] = now }
                    noted = invalidated
                }
                try await Task.sleep(for: .milliseconds(1))
            }
            return applied.map { String(format: "%.6f", $0) }.joined(separator: ",")
        }
    }
    print(line)
    exit(0)
}

if arguments.count >= 4, arguments[1] == "--l1" {
    // --l1 fleet|plain N: N L1 hits of one contender after the same setup (for callgrind:
    // ./callgrind-count.sh's `count` cannot pass three arguments, so run valgrind directly).
    let (which, reads) = (arguments[2], Int(arguments[3])!)
    let table = "taskkit_fleet_l1_\(getpid())"
    try await withClient { client in
        let fleet = PostgresFleetCache<String>(client: client, tableName: table) { _ in value64 }
        let plain = KeyedMonoTask<String, String>(maximumEntries: 10_000, resultExpireDuration: .seconds(300)) { _ in value64 }
        try await fleet.prepare()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await fleet.run() }
            defer { group.cancelAll() }
            while !fleet.isReceivingInvalidations { try await Task.sleep(for: .milliseconds(5)) }
            _ = try await fleet.value(forKey: "user:42")
            _ = try await plain.value(for: "user:42")
            for _ in 0..<reads {
                if which == "fleet" { _ = try await fleet.value(forKey: "user:42") } else { _ = try await plain.value(for: "user:42") }
            }
        }
        _ = try await client.query("DROP TABLE \(unescaped: table), \(unescaped: table)_tags, \(unescaped: table)_log")
    }
    exit(0)
}

let rounds = arguments.count > 1 ? Int(arguments[1]) ?? 5 : 5
let latencyKeys = arguments.count > 2 ? Int(arguments[2]) ?? 300 : 300
let table = "taskkit_fleet_bench_\(getpid())"
print("FleetCache: \(rounds) rounds, \(latencyKeys) keys for the latency; load average \(loadAverage())")

func loadAverage() -> String {
    ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(separator: " ")
}

try await withClient { client in
    try await PostgresFleetCache<String>(client: client, tableName: table) { _ in "" }.prepare()
}

// MARK: - a. L1 hit

try await withClient { client in
    let fleet = PostgresFleetCache<String>(client: client, tableName: table) { _ in value64 }
    let plain = KeyedMonoTask<String, String>(maximumEntries: 10_000, resultExpireDuration: .seconds(300)) { _ in value64 }
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { await fleet.run() }
        defer { group.cancelAll() }
        while !fleet.isReceivingInvalidations { try await Task.sleep(for: .milliseconds(5)) }
        let key = "user:42"
        _ = try await fleet.value(forKey: key)
        _ = try await plain.value(for: key)
        let reads = 1_000_000
        for readers in [1, 4] {
            var fleetNs: [Double] = [], plainNs: [Double] = [], ratios: [Double] = []
            for round in 0..<rounds {
                var f = 0.0, p = 0.0
                if round % 2 == 0 {
                    f = try await Measure.nanosecondsPerRead(readers: readers, reads: reads) { _ = try await fleet.value(forKey: key) }
                    p = try await Measure.nanosecondsPerRead(readers: readers, reads: reads) { _ = try await plain.value(for: key) }
                } else {
                    p = try await Measure.nanosecondsPerRead(readers: readers, reads: reads) { _ = try await plain.value(for: key) }
                    f = try await Measure.nanosecondsPerRead(readers: readers, reads: reads) { _ = try await fleet.value(forKey: key) }
                }
                fleetNs.append(f); plainNs.append(p); ratios.append(f / p)
            }
            print("""
                a. L1 hit, \(readers) reader\(readers == 1 ? "" : "s"), \(reads) reads per round: \
                PostgresFleetCache \(Measure.format(Measure.median(fleetNs))) ns/read, KeyedMonoTask \(Measure.format(Measure.median(plainNs))) ns/read, \
                ratio \(Measure.format(Measure.median(ratios), 3))x (rounds: \(ratios.map { Measure.format($0, 3) }.joined(separator: " "))); bar ≤ 1.2x
                """)
        }
    }
}

// MARK: - b. L2 hit

try await withClient { client in
    let keys = 2_000
    let loader = PostgresFleetCache<String>(client: client, tableName: table, resultExpireDuration: nil) { _ in value64 }
    try await withThrowingTaskGroup(of: Void.self) { group in
        for part in 0..<8 {
            group.addTask {
                for key in stride(from: part, to: keys, by: 8) { _ = try await loader.value(forKey: "l2:\(key)") }
            }
        }
        try await group.waitForAll()
    }
    // The rows' primary keys, for the plain SELECT.
    var hashes: [String] = []
    for key in 0..<keys {
        for try await hash in try await client.query(
            "SELECT key_hash FROM \(unescaped: table) WHERE key_prefix = \(ByteBuffer(string: "l2:\(key)"))"
        ).decode(String.self) { hashes.append(hash) }
    }
    precondition(hashes.count == keys, "the stored rows: \(hashes.count) of \(keys)")
    // Warm the connections of both paths.
    for key in 0..<100 { for try await _ in try await client.query("SELECT value FROM \(unescaped: table) WHERE key_hash = \(hashes[key])") {} }
    var fleetUs: [Double] = [], plainUs: [Double] = [], ratios: [Double] = []
    var flightUs: [Double] = [], flightRatios: [Double] = []
    func fleetRound() async throws -> Double {
        // A fresh cache: every key is an L1 miss, and its row is stored (an L2 hit).
        let cache = PostgresFleetCache<String>(client: client, tableName: table, resultExpireDuration: nil) { key in
            fatalError("L2 miss for \(key)")
        }
        let start = ContinuousClock.now
        for key in 0..<keys {
            let value = try await cache.value(forKey: "l2:\(key)")
            precondition(value.utf8.count == 64)
        }
        return (ContinuousClock.now - start) / .microseconds(1) / Double(keys)
    }
    // The shared tier alone: the same rows through PostgresSingleFlight, without the local tier
    // in front (to tell the fleet layer's cost from the single flight's).
    let flight = PostgresSingleFlight(client: client, tableName: table)
    func flightRound() async throws -> Double {
        let start = ContinuousClock.now
        for key in 0..<keys {
            let value: String = try await flight.value(forKey: "l2:\(key)", resultExpireDuration: nil) {
                fatalError("L2 miss for l2:\(key)")
            }
            precondition(value.utf8.count == 64)
        }
        return (ContinuousClock.now - start) / .microseconds(1) / Double(keys)
    }
    func plainRound() async throws -> Double {
        let start = ContinuousClock.now
        for key in 0..<keys {
            var bytes = 0
            for try await value in try await client.query(
                "SELECT value FROM \(unescaped: table) WHERE key_hash = \(hashes[key])"
            ).decode(ByteBuffer.self) { bytes = value.readableBytes }
            precondition(bytes > 0)
        }
        return (ContinuousClock.now - start) / .microseconds(1) / Double(keys)
    }
    // The hand-written two tiers: a fresh KeyedMonoTask (the fleet's local bound and expiry) whose
    // load is the plain SELECT, run in the load's task (no statement deadline).
    func handWrittenRound() async throws -> Double {
        let local = KeyedMonoTask<String, ByteBuffer>(maximumEntries: 10_000, resultExpireDuration: .seconds(300)) { hash in
            var row = ByteBuffer()
            for try await value in try await client.query(
                "SELECT value FROM \(unescaped: table) WHERE key_hash = \(hash)"
            ).decode(ByteBuffer.self) { row = value }
            return row
        }
        let start = ContinuousClock.now
        for key in 0..<keys {
            let value = try await local.value(for: hashes[key])
            precondition(value.readableBytes > 0)
        }
        return (ContinuousClock.now - start) / .microseconds(1) / Double(keys)
    }
    var handUs: [Double] = [], handRatios: [Double] = [], fleetOverHand: [Double] = []
    for round in 0..<rounds {
        var f = 0.0, p = 0.0, s = 0.0, h = 0.0
        if round % 2 == 0 {
            f = try await fleetRound(); p = try await plainRound(); s = try await flightRound(); h = try await handWrittenRound()
        } else {
            h = try await handWrittenRound(); s = try await flightRound(); p = try await plainRound(); f = try await fleetRound()
        }
        fleetUs.append(f); plainUs.append(p); ratios.append(f / p)
        flightUs.append(s); flightRatios.append(s / p)
        handUs.append(h); handRatios.append(h / p); fleetOverHand.append(f / h)
    }
    print("""
        b. L2 hit, 1 caller, \(keys) keys per round: PostgresFleetCache \(Measure.format(Measure.median(fleetUs))) µs/read, \
        plain SELECT \(Measure.format(Measure.median(plainUs))) µs/read, ratio \(Measure.format(Measure.median(ratios), 3))x \
        (rounds: \(ratios.map { Measure.format($0, 3) }.joined(separator: " "))); bar ≤ 1.2x
        b. L2 hit through PostgresSingleFlight alone: \(Measure.format(Measure.median(flightUs))) µs/read, \
        ratio \(Measure.format(Measure.median(flightRatios), 3))x the plain SELECT \
        (rounds: \(flightRatios.map { Measure.format($0, 3) }.joined(separator: " ")))
        b. L2 hit through a hand-written KeyedMonoTask over the plain SELECT: \(Measure.format(Measure.median(handUs))) µs/read, \
        ratio \(Measure.format(Measure.median(handRatios), 3))x the plain SELECT; PostgresFleetCache \
        \(Measure.format(Measure.median(fleetOverHand), 3))x it (rounds: \(fleetOverHand.map { Measure.format($0, 3) }.joined(separator: " ")))
        """)
}

// MARK: - c. Invalidation to visibility, 8 processes

for pollMilliseconds in [0, 100] {
    let processes = 8
    let modeTable = "\(table)_\(pollMilliseconds == 0 ? "listen" : "poll")"
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-cache-\(getpid())-\(pollMilliseconds)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    try await withClient { client in
        try await PostgresFleetCache<String>(client: client, tableName: modeTable) { _ in "" }.prepare()
    }
    let children = try (0..<processes).map { index in
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        process.arguments = ["--child", modeTable, "\(latencyKeys)", "\(pollMilliseconds)", directory.path, "\(index)"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        return (process, output)
    }
    let readyDeadline = ContinuousClock.now + .seconds(60)
    while (0..<processes).contains(where: { !FileManager.default.fileExists(atPath: directory.appendingPathComponent("ready-\($0)").path) }) {
        guard ContinuousClock.now < readyDeadline, children.allSatisfy({ $0.0.isRunning }) else {
            print("FleetCache: a child did not get ready"); exit(1)
        }
        try await Task.sleep(for: .milliseconds(10))
    }
    let returned = try await withClient { client -> [Double] in
        let cache = PostgresFleetCache<String>(client: client, tableName: modeTable) { _ in "" }
        var returned: [Double] = []
        for key in 0..<latencyKeys {
            try await cache.invalidate("k\(key)")
            returned.append(Date().timeIntervalSince1970)
            try await Task.sleep(for: .milliseconds(10))
        }
        return returned
    }
    var latencies: [Double] = []
    var missing = 0
    // The children exit once they saw every invalidation (at most 60 s).
    for (process, output) in children {
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let applied = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            .split(separator: ",").map { Double($0) ?? .nan }
        guard process.terminationStatus == 0, applied.count == latencyKeys else {
            print("FleetCache: a child failed (status \(process.terminationStatus))"); exit(1)
        }
        for (time, end) in zip(applied, returned) {
            if time.isNaN { missing += 1 } else { latencies.append((time - end) * 1_000) }
        }
    }
    latencies.sort()
    func at(_ fraction: Double) -> String {
        latencies.isEmpty ? "none" : Measure.format(latencies[min(latencies.count - 1, Int(Double(latencies.count) * fraction))])
    }
    let mode = pollMilliseconds == 0 ? "LISTEN/NOTIFY" : "polling every \(pollMilliseconds) ms"
    print("""
        c. invalidation to visibility, \(mode), \(processes) processes x \(latencyKeys) keys (one at a time, 10 ms apart): \
        p50 \(at(0.5)) ms, p99 \(at(0.99)) ms, max \(at(1)) ms\(missing > 0 ? ", \(missing) NOT applied" : "")\
        \(pollMilliseconds == 0 ? "; bar p99 ≤ 250 ms" : "")
        """)
    try await withClient { client in
        _ = try await client.query("DROP TABLE \(unescaped: modeTable), \(unescaped: modeTable)_tags, \(unescaped: modeTable)_log")
    }
}

try await withClient { client in
    _ = try await client.query("DROP TABLE \(unescaped: table), \(unescaped: table)_tags, \(unescaped: table)_log")
}
print("FleetCache: done; load average \(loadAverage())")
