// swift-tools-version: 6.2
// The benchmarks live in their own package so ordo-one/benchmark (and the peers measured
// against: swift-nio, OpenCombine) stay out of TaskKit's own build.
//
// Run all:   cd Benchmarks && swift package --disable-sandbox benchmark
// Run one:   cd Benchmarks && swift package --disable-sandbox benchmark --target CoFutureBenchmarks
// Instructions per iteration of the CoFuture and TaskStore workloads (callgrind): ./instruction-counts.sh
// PostgreSQL (a throwaway server from ../scripts/with-postgres):
//   ../scripts/with-postgres swift package --disable-sandbox benchmark --target PostgresBenchmarks
//   ../scripts/with-postgres swift run -c release PostgresThroughput
//   ../scripts/with-postgres swift run -c release FleetCache
import PackageDescription

let benchmarkPlugin: [Target.PluginUsage] = [.plugin(name: "BenchmarkPlugin", package: "benchmark")]

let package = Package(
    name: "TaskKitBenchmarks",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    dependencies: [
        // TaskKit's integrations measured here: TaskKitAsyncHTTPClient, TaskKitPostgres.
        .package(name: "TaskKit", path: "..", traits: ["AsyncHTTPClient", "PostgreSQL"]),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.0", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.80.0"),
        .package(url: "https://github.com/OpenCombine/OpenCombine.git", from: "0.14.0"),
        .package(url: "https://github.com/swhitty/FlyingFox.git", from: "0.27.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.0"),
    ],
    targets: [
        // The seed's CoFuture workload for CoFuture, NIO and OpenCombine, the contention workload
        // for CoFuture and NIO, and TaskStore's workloads with their bare `Task` baselines, shared
        // by the benchmarks and by the callgrind driver so both measure the same code.
        .target(
            name: "SeedWorkloads",
            dependencies: [
                "BenchmarkSupport",
                .product(name: "TaskKit", package: "TaskKit"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "OpenCombine", package: "OpenCombine"),
            ]
        ),
        // Helpers shared by several benchmark targets (a one-shot gate).
        .target(name: "BenchmarkSupport"),
        // `./instruction-counts.sh`: instructions per iteration under callgrind (CoFuture and its
        // peers; TaskStore against a bare `Task`).
        .executableTarget(
            name: "InstructionCounts",
            dependencies: [
                "SeedWorkloads",
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "OpenCombine", package: "OpenCombine"),
            ]
        ),
        .executableTarget(
            name: "CoFutureBenchmarks",
            dependencies: [
                "SeedWorkloads",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                // The contention peer: `MultiThreadedEventLoopGroup`.
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "OpenCombine", package: "OpenCombine"),
            ],
            path: "Benchmarks/CoFutureBenchmarks",
            plugins: benchmarkPlugin
        ),
        .executableTarget(
            name: "MonoTaskBenchmarks",
            dependencies: [
                "BenchmarkSupport",
                "SeedWorkloads",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "TaskKit", package: "TaskKit"),
            ],
            path: "Benchmarks/MonoTaskBenchmarks",
            plugins: benchmarkPlugin
        ),
        .executableTarget(
            name: "KeyedMonoTaskBenchmarks",
            dependencies: [
                "BenchmarkSupport",
                "SeedWorkloads",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "TaskKit", package: "TaskKit"),
            ],
            path: "Benchmarks/KeyedMonoTaskBenchmarks",
            plugins: benchmarkPlugin
        ),
        .executableTarget(
            name: "TaskStoreBenchmarks",
            dependencies: [
                "SeedWorkloads",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/TaskStoreBenchmarks",
            plugins: benchmarkPlugin
        ),
        .executableTarget(
            name: "TaskManagerBenchmarks",
            dependencies: [
                "BenchmarkSupport",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "TaskKit", package: "TaskKit"),
            ],
            path: "Benchmarks/TaskManagerBenchmarks",
            plugins: benchmarkPlugin
        ),
        .executableTarget(
            name: "HTTPBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "TaskKit", package: "TaskKit"),
                .product(name: "TaskKitHTTP", package: "TaskKit"),
                .product(name: "TaskKitAsyncHTTPClient", package: "TaskKit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "FlyingFox", package: "FlyingFox"),
            ],
            path: "Benchmarks/HTTPBenchmarks",
            plugins: benchmarkPlugin
        ),
        // PostgresSingleFlight: a stored-result hit against one plain SELECT of the same row on the
        // same client. Needs TASKKIT_POSTGRES_URL (registers nothing without it).
        .executableTarget(
            name: "PostgresBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "TaskKitPostgres", package: "TaskKit"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Benchmarks/PostgresBenchmarks",
            plugins: benchmarkPlugin
        ),
        // Paired workloads on the global executor with all its workers (package-benchmark's
        // runner parks one of them for an async benchmark): `swift run -c release ParallelPairs`.
        .executableTarget(
            name: "ParallelPairs", dependencies: ["SeedWorkloads", .product(name: "TaskKit", package: "TaskKit")]
        ),
        // An upstream outage under a KeyedMonoTask, with and without a fail-safe (issue 51):
        // `swift run -c release CacheOutage [seconds]`.
        .executableTarget(name: "CacheOutage", dependencies: [.product(name: "TaskKit", package: "TaskKit")]),
        // URLTaskManager under pressure (issue 50): the resilience policies' cost on a healthy
        // host, retry amplification with and without a budget, the circuit breaker:
        // `swift run -c release HTTPPressure overhead|amplification|breaker`.
        .executableTarget(
            name: "HTTPPressure",
            dependencies: [
                .product(name: "TaskKit", package: "TaskKit"),
                .product(name: "TaskKitHTTP", package: "TaskKit"),
                .product(name: "TaskKitAsyncHTTPClient", package: "TaskKit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // `./http-instruction-counts.sh`: URLTaskManager's own instructions per request (a
        // transport that answers at once), policies off and on.
        .executableTarget(
            name: "HTTPInstructionCounts",
            dependencies: [
                .product(name: "TaskKitHTTP", package: "TaskKit"),
                .product(name: "TaskKitAsyncHTTPClient", package: "TaskKit"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]
        ),
        // PostgresSingleFlight: distinct keys per second with 8 processes (copies of itself).
        .executableTarget(
            name: "PostgresThroughput",
            dependencies: [
                .product(name: "TaskKitPostgres", package: "TaskKit"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        // PostgresFleetCache: L1 and L2 hits against their peers, invalidation-to-visibility
        // latency with 8 processes (copies of itself).
        .executableTarget(
            name: "FleetCache",
            dependencies: [
                .product(name: "TaskKit", package: "TaskKit"),
                .product(name: "TaskKitPostgres", package: "TaskKit"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
