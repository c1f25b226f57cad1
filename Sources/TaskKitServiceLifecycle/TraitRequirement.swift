// TaskKitServiceLifecycle is built only with the package trait `ServiceLifecycle`, which brings its dependencies.
#if !ServiceLifecycle
#error("TaskKitServiceLifecycle needs TaskKit's package trait ServiceLifecycle: depend on TaskKit with .package(url: ..., from: ..., traits: [\"ServiceLifecycle\"]); in TaskKit's own repository, build with --enable-all-traits")
#endif
