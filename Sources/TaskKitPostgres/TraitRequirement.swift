// TaskKitPostgres is built only with the package trait `PostgreSQL`, which brings its dependencies.
// Without it, every other source file of the module is compiled out (each is wrapped in
// `#if PostgreSQL`, as a new one must be) and this file stops the build naming the trait.
#if !PostgreSQL
#error("TaskKitPostgres needs TaskKit's package trait PostgreSQL: depend on TaskKit with .package(url: ..., from: ..., traits: [\"PostgreSQL\"]); in TaskKit's own repository, build with --enable-all-traits")
#endif
