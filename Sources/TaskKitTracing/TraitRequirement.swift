// TaskKitTracing is built only with the package trait `Tracing`, which brings its dependencies.
#if !Tracing
#error("TaskKitTracing needs TaskKit's package trait Tracing: depend on TaskKit with .package(url: ..., from: ..., traits: [\"Tracing\"]); in TaskKit's own repository, build with --enable-all-traits")
#endif
