import Foundation

/// Runs a long, blocking, synchronous `body` on a thread of its own and returns its result.
///
/// Swift Testing runs every test, synchronous ones included, on Swift's cooperative thread pool,
/// which has one thread per core (two on the CI machine). A test that blocks its thread for
/// seconds (a 100,000-future chain, a `concurrentPerform` stress loop under ThreadSanitizer)
/// starves every other test of half the pool, and a test that waits on something real — a
/// loopback server starting to listen — can then miss its hang guard. Moving such bodies onto a
/// dedicated thread keeps the pool free for the tests that need it.
///
/// - Parameters:
///   - stackSize: The thread's stack size in bytes; 512 KiB by default, the smallest stack a
///     secondary thread commonly gets (Darwin's default), so "does not overflow the stack"
///     tests hold on every platform.
///   - body: The blocking work; its error, if it throws, is rethrown (typed).
public func onDedicatedThread<T: Sendable, E: Error>(
    stackSize: Int = 512 * 1024,
    _ body: @escaping @Sendable () throws(E) -> T
) async throws(E) -> T {
    let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, E>, Never>) in
        // The continuation is resumed exactly once, here, after `body` returned or threw.
        let thread = Thread { continuation.resume(returning: Result(catching: body)) }
        thread.stackSize = stackSize
        thread.start()
    }
    return try result.get()
}
