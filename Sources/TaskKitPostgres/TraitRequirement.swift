// TaskKitPostgres is built only with the package trait `PostgreSQL`, which brings its dependencies.
#if !PostgreSQL
#error("TaskKitPostgres needs TaskKit's package trait PostgreSQL: depend on TaskKit with .package(url: ..., from: ..., traits: [\"PostgreSQL\"]); in TaskKit's own repository, build with --enable-all-traits")
#endif
