// TaskKitAsyncHTTPClient has its code only with the package trait `AsyncHTTPClient`, which brings
// its dependencies. Without it, every other source file of the module is compiled out (each is
// wrapped in `#if AsyncHTTPClient`, as a new one must be), so a plain `swift build` of the
// repository succeeds, and the module holds only this stand-in, whose message names the trait.
#if !AsyncHTTPClient
/// Present only without the package trait `AsyncHTTPClient`: using it says how to enable it.
@available(
    *, unavailable,
    message: "TaskKitAsyncHTTPClient needs TaskKit's package trait AsyncHTTPClient: depend on TaskKit with .package(url: ..., from: ..., traits: [\"AsyncHTTPClient\"]); in TaskKit's own repository, build with --enable-all-traits"
)
public enum AsyncHTTPClientTransport {}
#endif
