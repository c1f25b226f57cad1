// Where Combine does not exist, TaskKitCombine builds on OpenCombine, brought by the package trait
// `OpenCombine`. Without either, the module's other files are compiled out (each is wrapped in
// `#if canImport(Combine) || OpenCombine`) and this file stops the build naming the trait.
#if !canImport(Combine) && !OpenCombine
#error("TaskKitCombine needs TaskKit's package trait OpenCombine on platforms without Combine: depend on TaskKit with .package(url: ..., from: ..., traits: [\"OpenCombine\"]); in TaskKit's own repository, build with --enable-all-traits")
#endif
