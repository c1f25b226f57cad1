// TaskKitTracing has its code only with the package trait `Tracing`, which brings its
// dependencies. Without it, every other source file of the module is compiled out (each is
// wrapped in `#if Tracing`, as a new one must be), so a plain `swift build` of the repository
// succeeds, and the module holds only this stand-in, whose message names the trait.
#if !Tracing
import TaskKit

extension TaskTracing {
    /// Present only without the package trait `Tracing`: using it says how to enable it.
    @available(
        *, unavailable,
        message: "TaskKitTracing needs TaskKit's package trait Tracing: depend on TaskKit with .package(url: ..., from: ..., traits: [\"Tracing\"]); in TaskKit's own repository, build with --enable-all-traits"
    )
    public static var distributedTracing: TaskTracing { fatalError("unavailable") }
}
#endif
