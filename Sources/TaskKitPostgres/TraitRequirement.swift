// TaskKitPostgres has its code only with the package trait `PostgreSQL`, which brings its
// dependencies. Without it, every other source file of the module is compiled out (each is
// wrapped in `#if PostgreSQL`, as a new one must be), so a plain `swift build` of the repository
// succeeds, and the module holds only this stand-in, whose message names the trait.
#if !PostgreSQL
/// Present only without the package trait `PostgreSQL`: using it says how to enable it.
@available(
    *, unavailable,
    message: "TaskKitPostgres needs TaskKit's package trait PostgreSQL: depend on TaskKit with .package(url: ..., from: ..., traits: [\"PostgreSQL\"]); in TaskKit's own repository, build with --enable-all-traits"
)
public enum PostgresSingleFlight {}
#endif
