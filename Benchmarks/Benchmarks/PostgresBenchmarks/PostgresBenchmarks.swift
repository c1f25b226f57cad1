// PostgresSingleFlight's stored-result hit against the floor it cannot beat: one plain SELECT of
// the same row on the same client (the hit is one SELECT plus the in-process merge and JSON
// decoding). Needs a server: TASKKIT_POSTGRES_URL (../scripts/with-postgres sets it); without
// one no benchmark is registered.
//
// - "hit": `value(forKey:)` of a stored, fresh 1-field value, 1,000 sequential calls per sample.
// - "plain SELECT": `SELECT value FROM <table> WHERE key_hash = $1` of that row, 1,000 per sample.
// Figures are per call (`scalingFactor: .kilo`).
import Benchmark
import Foundation
import Logging
import PostgresNIO
import TaskKitPostgres

struct Token: Codable, Sendable {
    let value: String
}

let url = ProcessInfo.processInfo.environment["TASKKIT_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }

/// The client, running for the life of the process (started on first use).
let client: PostgresClient? = url.map { url in
    let components = URLComponents(string: url)!
    let client = PostgresClient(
        configuration: .init(
            host: components.host!, port: components.port ?? 5432, username: components.user!,
            password: components.password, database: components.path.split(separator: "/").first.map(String.init),
            tls: .disable
        ),
        backgroundLogger: Logger(label: "benchmark", factory: { _ in SwiftLogNoOpLogHandler() })
    )
    Task { await client.run() }
    return client
}

let table = "taskkit_benchmark_\(getpid())"
let key = "benchmark/hit"

let benchmarks: @Sendable () -> Void = {
    guard let client else {
        print("PostgresBenchmarks: TASKKIT_POSTGRES_URL is not set; nothing to measure. Run: ../scripts/with-postgres swift package --disable-sandbox benchmark --target PostgresBenchmarks")
        return
    }
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal],
        warmupIterations: 1,
        scalingFactor: .kilo,
        maxDuration: .seconds(5),
        maxIterations: 20
    )
    let flight = PostgresSingleFlight(client: client, tableName: table)

    Benchmark("hit (stored, fresh)", configuration: configuration) { benchmark in
        try await flight.prepare()
        _ = try await flight.value(forKey: key, resultExpireDuration: .seconds(3_600)) { Token(value: "v") }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try await flight.value(forKey: key, resultExpireDuration: .seconds(3_600)) { Token(value: "miss") })
        }
        benchmark.stopMeasurement()
    }

    Benchmark("plain SELECT of the same row", configuration: configuration) { benchmark in
        try await flight.prepare()
        _ = try await flight.value(forKey: key, resultExpireDuration: .seconds(3_600)) { Token(value: "v") }
        // The row's primary key, SHA-256 hex of the key (computed once, outside the measurement).
        var keyHash = ""
        for try await hash in try await client.query(
            "SELECT encode(sha256(convert_to(\(key), 'UTF8')), 'hex')"
        ).decode(String.self) {
            keyHash = hash
        }
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            var bytes = 0
            for try await value in try await client.query(
                "SELECT value FROM \(unescaped: table) WHERE key_hash = \(keyHash)"
            ).decode(Data.self) {
                bytes += value.count
            }
            precondition(bytes > 0, "the row is missing")
            blackHole(bytes)
        }
        benchmark.stopMeasurement()
    }
}
