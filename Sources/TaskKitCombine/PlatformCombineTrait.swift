// Where Combine does not exist, TaskKitCombine builds on OpenCombine, brought by the package trait
// `OpenCombine`. Without either, the module's other files are compiled out (each is wrapped in
// `#if canImport(Combine) || OpenCombine`), so a plain `swift build` of the repository succeeds,
// and the module holds only this stand-in, whose message names the trait.
#if !canImport(Combine) && !OpenCombine
import TaskKit

extension CoFuture {
    /// Present only where neither Combine nor the package trait `OpenCombine` is: using it says
    /// how to enable the trait.
    @available(
        *, unavailable,
        message: "TaskKitCombine needs TaskKit's package trait OpenCombine on platforms without Combine: depend on TaskKit with .package(url: ..., from: ..., traits: [\"OpenCombine\"]); in TaskKit's own repository, build with --enable-all-traits"
    )
    public func publisher() -> Never { fatalError("unavailable") }
}
#endif
