// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "TaskKit",
    platforms: [
        // The floor of `Synchronization.Atomic`.
        .macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2),
    ],
    products: [
        .library(name: "TaskKit", targets: ["TaskKit"]),
        .library(name: "TaskKitCombine", targets: ["TaskKitCombine"]),
        .library(name: "TaskKitHTTP", targets: ["TaskKitHTTP"]),
        // The HTTP transport for servers. Only this product builds AsyncHTTPClient: a user of
        // `TaskKit` or `TaskKitHTTP` alone never does.
        .library(name: "TaskKitAsyncHTTPClient", targets: ["TaskKitAsyncHTTPClient"]),
        // Single-flight across processes on PostgreSQL. Only this product builds postgres-nio.
        .library(name: "TaskKitPostgres", targets: ["TaskKitPostgres"]),
        // `TaskManager` and `URLTaskManager` as swift-service-lifecycle services. Only this product
        // builds swift-service-lifecycle.
        .library(name: "TaskKitServiceLifecycle", targets: ["TaskKitServiceLifecycle"]),
        // Tracing through swift-distributed-tracing, opted into per instance. Only this product
        // builds swift-distributed-tracing: `TaskKit` and `TaskKitHTTP` only hold its seam.
        .library(name: "TaskKitTracing", targets: ["TaskKitTracing"]),
        .executable(name: "taskkit-demo", targets: ["taskkit-demo"]),
        .executable(name: "taskkit-prometheus-example", targets: ["taskkit-prometheus-example"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        // API only: TaskKit reports through whatever `MetricsSystem` the application bootstraps.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        // The TaskKitTracing product only.
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/OpenCombine/OpenCombine.git", from: "0.14.0"),
        .package(url: "https://github.com/swhitty/FlyingFox.git", from: "0.27.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        // Already a dependency of postgres-nio: SHA-256 of the keys.
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        // The Prometheus example only (its own executable target: nothing else builds it).
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // Documentation only: `swift package generate-documentation --target TaskKit`.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.4.0"),
    ],
    targets: [
        .target(
            name: "TaskKit",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        .target(
            name: "TaskKitCombine",
            dependencies: [
                "TaskKit",
                .product(
                    name: "OpenCombine", package: "OpenCombine",
                    condition: .when(platforms: [.linux, .windows, .android, .wasi, .openbsd])
                ),
            ]
        ),
        .target(
            name: "TaskKitHTTP",
            dependencies: [
                "TaskKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        .target(
            name: "TaskKitAsyncHTTPClient",
            dependencies: [
                "TaskKit",
                "TaskKitHTTP",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .target(
            name: "TaskKitPostgres",
            dependencies: [
                "TaskKit",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .target(
            name: "TaskKitServiceLifecycle",
            dependencies: [
                "TaskKit",
                "TaskKitHTTP",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "TaskKitTracing",
            dependencies: [
                "TaskKit",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The worker process the TaskKitPostgres tests and benchmarks start: callers of one
        // `PostgresSingleFlight` in a separate process (not a product).
        .executableTarget(
            name: "taskkit-postgres-worker",
            dependencies: [
                "TaskKitPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "taskkit-demo",
            dependencies: [
                "TaskKit",
                "TaskKitHTTP",
                "TaskKitCombine",
                "TaskKitLoopbackServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Exports TaskKit's metrics in Prometheus text format while a workload runs.
        .executableTarget(
            name: "taskkit-prometheus-example",
            dependencies: [
                "TaskKit",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // An embedded loopback HTTP server (FlyingFox) with the endpoints the HTTP tests and the
        // demo exercise: expiring tokens, flaky resources, Retry-After, slow and broken responses.
        .target(
            name: "TaskKitLoopbackServer",
            dependencies: [.product(name: "FlyingFox", package: "FlyingFox")]
        ),
        // Test-only helpers shared by the test targets: a manual clock, one gate, one `eventually`
        // with a deadline, one dedicated-thread runner, a seeded random number generator.
        .target(
            name: "TaskKitTestSupport",
            dependencies: [
                "TaskKit",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        .testTarget(
            name: "TaskKitTests",
            dependencies: [
                "TaskKit", "TaskKitTestSupport",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        .testTarget(
            name: "TaskKitCombineTests",
            dependencies: [
                "TaskKit", "TaskKitCombine",
                .product(
                    name: "OpenCombine", package: "OpenCombine",
                    condition: .when(platforms: [.linux, .windows, .android, .wasi, .openbsd])
                ),
            ]
        ),
        .testTarget(
            name: "TaskKitHTTPTests",
            dependencies: [
                "TaskKit", "TaskKitHTTP", "TaskKitTestSupport", "TaskKitLoopbackServer",
                "TaskKitAsyncHTTPClient",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        // Spans recorded by swift-distributed-tracing's InMemoryTracer; HTTP against the loopback server.
        .testTarget(
            name: "TaskKitTracingTests",
            dependencies: [
                "TaskKit", "TaskKitHTTP", "TaskKitTracing", "TaskKitTestSupport", "TaskKitLoopbackServer",
                "TaskKitAsyncHTTPClient",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        // Inside a real `ServiceGroup`, shut down by a signal.
        .testTarget(
            name: "TaskKitServiceLifecycleTests",
            dependencies: [
                "TaskKit", "TaskKitHTTP", "TaskKitServiceLifecycle", "TaskKitTestSupport",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Against a real PostgreSQL server (`scripts/with-postgres`); skipped without one.
        .testTarget(
            name: "TaskKitPostgresTests",
            dependencies: [
                "TaskKitPostgres", "TaskKitTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
