// The loopback server (FlyingFox) is built only with the package trait `Examples`.
#if !Examples
#error("TaskKitLoopbackServer (the demo's and the tests' HTTP server) needs the package trait Examples: build with --enable-all-traits")
#endif
