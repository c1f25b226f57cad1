// TaskKitServiceLifecycle is built only with the package trait `ServiceLifecycle`, which brings its dependencies.
// Without it, every other source file of the module is compiled out (each is wrapped in
// `#if ServiceLifecycle`, as a new one must be) and this file stops the build naming the trait.
#if !ServiceLifecycle
#error("TaskKitServiceLifecycle needs TaskKit's package trait ServiceLifecycle: depend on TaskKit with .package(url: ..., from: ..., traits: [\"ServiceLifecycle\"]); in TaskKit's own repository, build with --enable-all-traits")
#endif
