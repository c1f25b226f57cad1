// TaskKitTracing is built only with the package trait `Tracing`, which brings its dependencies.
// Without it, every other source file of the module is compiled out (each is wrapped in
// `#if Tracing`, as a new one must be) and this file stops the build naming the trait.
#if !Tracing
#error("TaskKitTracing needs TaskKit's package trait Tracing: depend on TaskKit with .package(url: ..., from: ..., traits: [\"Tracing\"]); in TaskKit's own repository, build with --enable-all-traits")
#endif
