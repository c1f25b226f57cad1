// Where Combine does not exist, TaskKitCombine builds on OpenCombine, brought by the package trait
// `OpenCombine`.
#if !canImport(Combine) && !OpenCombine
#error("TaskKitCombine needs TaskKit's package trait OpenCombine on platforms without Combine: depend on TaskKit with .package(url: ..., from: ..., traits: [\"OpenCombine\"]); in TaskKit's own repository, build with --enable-all-traits")
#endif
