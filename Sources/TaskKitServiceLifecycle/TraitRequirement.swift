// TaskKitServiceLifecycle has its code only with the package trait `ServiceLifecycle`, which
// brings its dependencies. Without it, every other source file of the module is compiled out
// (each is wrapped in `#if ServiceLifecycle`, as a new one must be), so a plain `swift build` of
// the repository succeeds and the module is empty: `TaskManager` and `URLTaskManager` are not
// `Service`s until the trait is on (`.package(url: ..., from: ..., traits: ["ServiceLifecycle"])`).
