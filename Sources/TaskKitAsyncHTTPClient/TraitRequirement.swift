// TaskKitAsyncHTTPClient is built only with the package trait `AsyncHTTPClient`, which brings its dependencies.
#if !AsyncHTTPClient
#error("TaskKitAsyncHTTPClient needs TaskKit's package trait AsyncHTTPClient: depend on TaskKit with .package(url: ..., from: ..., traits: [\"AsyncHTTPClient\"]); in TaskKit's own repository, build with --enable-all-traits")
#endif
