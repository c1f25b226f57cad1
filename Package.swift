// swift-tools-version: 6.2
import PackageDescription

// Package traits (SE-0450): every integration that brings dependencies is opted into, so a
// package depending on `TaskKit`, `TaskKitHTTP` or `TaskKitTesting` with default traits
// fetches only swift-log, swift-collections and swift-metrics. Enable a trait on the
// dependency to use its product: `.package(url: ..., from: ..., traits: ["AsyncHTTPClient"])`.
// This repository's own build and tests need them all: `swift test --enable-all-traits`.
let integrationTraits: [Trait] = [
    .trait(
        name: "AsyncHTTPClient",
        description: "The TaskKitAsyncHTTPClient product: URLTaskManager's transport on AsyncHTTPClient and SwiftNIO."
    ),
    .trait(
        name: "PostgreSQL",
        description: "The TaskKitPostgres product: single-flight across processes on postgres-nio."
    ),
    .trait(
        name: "ServiceLifecycle",
        description: "The TaskKitServiceLifecycle product: TaskManager and URLTaskManager as swift-service-lifecycle services."
    ),
    .trait(
        name: "Tracing",
        description: "The TaskKitTracing product: spans through swift-distributed-tracing."
    ),
    .trait(
        name: "OpenCombine",
        description: "The TaskKitCombine product on platforms without Combine (Linux, Windows, Android): builds it on OpenCombine."
    ),
    .trait(
        name: "Examples",
        description: "This repository's executables (taskkit-demo, taskkit-prometheus-example), the loopback HTTP server (FlyingFox) they and its tests use, and the GraphQL batch-loading example test (Graphiti).",
        enabledTraits: ["OpenCombine"]
    ),
]

let enableAllTraitsByDefault =
    Context.environment["TASKKIT_ALL_TRAITS"] == "1" || Context.environment["SPI_GENERATE_DOCS"] != nil

let package = Package(
    name: "TaskKit",
    platforms: [
        // The floor of `Synchronization.Atomic`.
        .macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2),
    ],
    products: [
        .library(name: "TaskKit", targets: ["TaskKit"]),
        // What tests of code that uses TaskKit need: a manual clock to inject.
        .library(name: "TaskKitTesting", targets: ["TaskKitTesting"]),
        // `CoFuture` <-> `Publisher`: Combine on Apple platforms, OpenCombine (trait `OpenCombine`)
        // elsewhere.
        .library(name: "TaskKitCombine", targets: ["TaskKitCombine"]),
        .library(name: "TaskKitHTTP", targets: ["TaskKitHTTP"]),
        // The HTTP transport for servers (trait `AsyncHTTPClient`).
        .library(name: "TaskKitAsyncHTTPClient", targets: ["TaskKitAsyncHTTPClient"]),
        // Single-flight across processes on PostgreSQL (trait `PostgreSQL`).
        .library(name: "TaskKitPostgres", targets: ["TaskKitPostgres"]),
        // `TaskManager` and `URLTaskManager` as swift-service-lifecycle services (trait
        // `ServiceLifecycle`).
        .library(name: "TaskKitServiceLifecycle", targets: ["TaskKitServiceLifecycle"]),
        // Tracing through swift-distributed-tracing, opted into per instance (trait `Tracing`):
        // `TaskKit` and `TaskKitHTTP` only hold its seam.
        .library(name: "TaskKitTracing", targets: ["TaskKitTracing"]),
        .executable(name: "taskkit-demo", targets: ["taskkit-demo"]),
        .executable(name: "taskkit-prometheus-example", targets: ["taskkit-prometheus-example"]),
    ],
    traits: Set(integrationTraits + [
        // Nothing by default. Every trait is on by default for tools that cannot pass
        // `--enable-all-traits`: with `TASKKIT_ALL_TRAITS=1` in the environment (the Apple
        // type-check in `.ci/run`) and when the Swift Package Index builds the documentation
        // (it sets `SPI_GENERATE_DOCS`).
        .default(enabledTraits: enableAllTraitsByDefault ? Set(integrationTraits.map(\.name)) : []),
    ]),
    // Every dependency after the first three is used only under a trait (`condition:
    // .when(traits:)`), so SwiftPM does not fetch it for a package that leaves the trait off.
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        // API only: TaskKit reports through whatever `MetricsSystem` the application bootstraps.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
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
        // The Prometheus example only (trait `Examples`).
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // The GraphQL batch-loading example test only (trait `Examples`; brings GraphQLSwift/GraphQL).
        .package(url: "https://github.com/GraphQLSwift/Graphiti.git", from: "3.1.0"),
        // Documentation only: `swift package generate-documentation`, what the Swift Package Index
        // runs (`scripts/build-docs` renders the same with docc from the tests' build). No target
        // uses it, so a package depending on TaskKit never fetches it.
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
                    condition: .when(platforms: [.linux, .windows, .android, .wasi, .openbsd], traits: ["OpenCombine"])
                ),
            ]
        ),
        .target(
            name: "TaskKitHTTP",
            dependencies: [
                "TaskKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        .target(
            name: "TaskKitAsyncHTTPClient",
            dependencies: [
                "TaskKit",
                "TaskKitHTTP",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["AsyncHTTPClient"])),
            ]
        ),
        .target(
            name: "TaskKitPostgres",
            dependencies: [
                "TaskKit",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["PostgreSQL"])),
            ]
        ),
        .target(
            name: "TaskKitServiceLifecycle",
            dependencies: [
                "TaskKit",
                "TaskKitHTTP",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["ServiceLifecycle"])),
            ]
        ),
        .target(
            name: "TaskKitTracing",
            dependencies: [
                "TaskKit",
                .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["Tracing"])),
            ]
        ),
        // The worker process the TaskKitPostgres tests and benchmarks start: callers of one
        // `PostgresSingleFlight` in a separate process (not a product).
        .executableTarget(
            name: "taskkit-postgres-worker",
            dependencies: [
                "TaskKitPostgres",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
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
                .product(name: "ArgumentParser", package: "swift-argument-parser", condition: .when(traits: ["Examples"])),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // One request in a process of its own (not a product): the HTTP tests check that a
        // server closing mid-headers cannot stop a process that uses the recommended setup.
        .executableTarget(
            name: "taskkit-http-probe",
            dependencies: [
                "TaskKitHTTP",
                "TaskKitAsyncHTTPClient",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["AsyncHTTPClient"])),
            ]
        ),
        // Exports TaskKit's metrics in Prometheus text format while a workload runs.
        .executableTarget(
            name: "taskkit-prometheus-example",
            dependencies: [
                "TaskKit",
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus", condition: .when(traits: ["Examples"])),
            ]
        ),
        // An embedded loopback HTTP server (FlyingFox) with the endpoints the HTTP tests and the
        // demo exercise: expiring tokens, flaky resources, Retry-After, slow and broken responses.
        .target(
            name: "TaskKitLoopbackServer",
            dependencies: [.product(name: "FlyingFox", package: "FlyingFox", condition: .when(traits: ["Examples"]))]
        ),
        // The manual clock for users' tests (the TaskKitTesting product).
        .target(name: "TaskKitTesting", dependencies: ["TaskKit"]),
        // Test-only helpers shared by the test targets: one gate, one `eventually` with a
        // deadline, one dedicated-thread runner, a seeded random number generator, and the manual
        // clock's wait that records a test issue.
        .target(
            name: "TaskKitTestSupport",
            dependencies: [
                "TaskKit", "TaskKitTesting",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        .testTarget(
            name: "TaskKitTests",
            dependencies: [
                "TaskKit", "TaskKitTestSupport", "TaskKitTesting",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        .testTarget(
            name: "TaskKitCombineTests",
            dependencies: [
                "TaskKit", "TaskKitCombine",
                .product(
                    name: "OpenCombine", package: "OpenCombine",
                    condition: .when(platforms: [.linux, .windows, .android, .wasi, .openbsd], traits: ["OpenCombine"])
                ),
            ]
        ),
        .testTarget(
            name: "TaskKitHTTPTests",
            dependencies: [
                "TaskKit", "TaskKitHTTP", "TaskKitTestSupport", "TaskKitTesting", "TaskKitLoopbackServer",
                "TaskKitAsyncHTTPClient",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        // Spans recorded by swift-distributed-tracing's InMemoryTracer; HTTP against the loopback server.
        .testTarget(
            name: "TaskKitTracingTests",
            dependencies: [
                "TaskKit", "TaskKitHTTP", "TaskKitTracing", "TaskKitTestSupport", "TaskKitLoopbackServer",
                "TaskKitAsyncHTTPClient",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["Tracing"])),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing", condition: .when(traits: ["Tracing"])),
            ]
        ),
        // Inside a real `ServiceGroup`, shut down by a signal.
        .testTarget(
            name: "TaskKitServiceLifecycleTests",
            dependencies: [
                "TaskKit", "TaskKitHTTP", "TaskKitServiceLifecycle", "TaskKitTestSupport", "TaskKitTesting",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["ServiceLifecycle"])),
                .product(name: "UnixSignals", package: "swift-service-lifecycle", condition: .when(traits: ["ServiceLifecycle"])),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The article's batch-loading example: a Graphiti schema whose resolvers load through a
        // batched `KeyedMonoTask` (trait `Examples`; without it the target has no sources to build).
        .testTarget(
            name: "TaskKitGraphQLTests",
            dependencies: [
                "TaskKit", "TaskKitTestSupport",
                .product(name: "Graphiti", package: "Graphiti", condition: .when(traits: ["Examples"])),
            ]
        ),
        // Every Swift sample of the README and the documentation catalogs, written into
        // Generated/ by `scripts/samples` (CI checks it is up to date), compiled against the
        // public products only; a deprecated API in a sample is an error. Nothing here runs.
        .testTarget(
            name: "TaskKitSampleTests",
            dependencies: [
                "TaskKit", "TaskKitTesting", "TaskKitHTTP", "TaskKitAsyncHTTPClient", "TaskKitPostgres",
                "TaskKitServiceLifecycle", "TaskKitTracing", "TaskKitCombine",
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["AsyncHTTPClient"])),
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: .when(traits: ["ServiceLifecycle"])),
                .product(name: "Tracing", package: "swift-distributed-tracing", condition: .when(traits: ["Tracing"])),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing", condition: .when(traits: ["Tracing"])),
                .product(name: "Prometheus", package: "swift-prometheus", condition: .when(traits: ["Examples"])),
                .product(name: "Graphiti", package: "Graphiti", condition: .when(traits: ["Examples"])),
                .product(
                    name: "OpenCombine", package: "OpenCombine",
                    condition: .when(platforms: [.linux, .windows, .android, .wasi, .openbsd], traits: ["OpenCombine"])
                ),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ],
            exclude: ["Preludes"],
            swiftSettings: [.treatWarning("DeprecatedDeclaration", as: .error)]
        ),
        // Against a real PostgreSQL server (`scripts/with-postgres`); skipped without one.
        .testTarget(
            name: "TaskKitPostgresTests",
            dependencies: [
                "TaskKitPostgres", "TaskKitTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["PostgreSQL"])),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: .when(traits: ["PostgreSQL"])),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// CI's sanitizer runs (`.ci/run`) set TASKKIT_SANITIZE to `thread` or `address`: every target of
// this package is compiled and linked with that sanitizer, and no dependency is. The sanitizer
// checks all of TaskKit's own code, and the dependencies' compiled code stays the one the debug
// build in the same build folder already made, so a sanitizer run rebuilds only this package.
// (SwiftPM's `--sanitize` instruments every package: a second and third build of SwiftNIO,
// BoringSSL and postgres-nio that checks none of TaskKit's code.)
if let sanitizer = Context.environment["TASKKIT_SANITIZE"], !sanitizer.isEmpty {
    precondition(
        ["thread", "address"].contains(sanitizer),
        "TASKKIT_SANITIZE must be thread or address, not \(sanitizer)"
    )
    for target in package.targets {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-sanitize=\(sanitizer)"])]
        target.linkerSettings = (target.linkerSettings ?? []) + [.unsafeFlags(["-sanitize=\(sanitizer)"])]
    }
}
