// The loopback server has its code only with the package trait `Examples` (FlyingFox): without
// it, LoopbackServer.swift is compiled out, and so are the tests and the demo that use it.
