// TaskKitAsyncHTTPClient is built only with the package trait `AsyncHTTPClient`, which brings its dependencies.
// Without it, every other source file of the module is compiled out (each is wrapped in
// `#if AsyncHTTPClient`, as a new one must be) and this file stops the build naming the trait.
#if !AsyncHTTPClient
#error("TaskKitAsyncHTTPClient needs TaskKit's package trait AsyncHTTPClient: depend on TaskKit with .package(url: ..., from: ..., traits: [\"AsyncHTTPClient\"]); in TaskKit's own repository, build with --enable-all-traits")
#endif
