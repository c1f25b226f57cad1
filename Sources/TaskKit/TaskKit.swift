// TaskKit: tools for asynchronous work.
//
// CoFuture / CoPromise (Future/), MonoTask (MonoTask/), TaskStore (TaskStore/), TaskManager
// (TaskManager/) and the shared retry model (Retry/). See TaskKit.docc and ARCHITECTURE.md.
