import Dispatch
import Foundation
import Testing
@testable import TaskKit
import TaskKitTestSupport

/// A counter guarded by a `ParkingMutex`, for the tests below.
private final class GuardedCounter: @unchecked Sendable {
    // @unchecked Sendable is sound: `count` is read and written only between `mutex.lock` and
    // `mutex.unlock` (or after every thread that did so has been joined through a DispatchGroup).
    let mutex = ParkingMutex()
    var count = 0

    var key: ObjectIdentifier { ObjectIdentifier(self) }

    func increment() {
        mutex.lock(key)
        count += 1
        mutex.unlock(key)
    }
}

/// Starts `threads` threads running `body(index)` at once and waits for all of them, at most
/// `seconds`; returns whether they all finished in time.
private func runThreads(_ threads: Int, seconds: Int = 30, _ body: @escaping @Sendable (Int) -> Void) -> Bool {
    let group = DispatchGroup()
    for index in 0..<threads {
        group.enter()
        Thread {
            body(index)
            group.leave()
        }.start()
    }
    return group.wait(timeout: .now() + .seconds(seconds)) == .success
}

/// The Linux lock of every CoFuture, tested directly: its contended and parking paths are rare in
/// the future tests (a future's critical sections are a few instructions long).
@Suite("ParkingMutex", .serialized)
struct ParkingMutexTests {
    @Test(.scaledTimeLimit(minutes: 1))
    func manyThreadsIncrementingUnderOneMutexLoseNoUpdate() async {
        let counter = GuardedCounter()
        let finished = await onDedicatedThread {
            runThreads(8) { _ in
                for _ in 0..<20_000 { counter.increment() }
            }
        }
        #expect(finished)
        #expect(counter.count == 8 * 20_000)
    }

    @Test(.scaledTimeLimit(minutes: 1))
    func waitersParkWhileTheHolderSleepsAndAreAllWoken() async {
        let counter = GuardedCounter()
        let (finished, parkedSeen) = await onDedicatedThread { () -> (Bool, Int) in
            let key = counter.key
            counter.mutex.lock(key)
            let waiters = DispatchGroup()
            for _ in 0..<4 {
                waiters.enter()
                Thread {
                    counter.increment()  // blocks: the mutex is held
                    waiters.leave()
                }.start()
            }
            // Wait (bounded) until at least one waiter has parked: its spin is a few µs.
            var parked = 0
            let deadline = Date().addingTimeInterval(10)
            while parked == 0, Date() < deadline {
                Thread.sleep(forTimeInterval: 0.001)
                parked = ParkingLot.bucket(for: key).withLock { $0.count { $0.key == key } }
            }
            counter.count += 100  // still held: no waiter has run
            counter.mutex.unlock(key)
            let finished = waiters.wait(timeout: .now() + .seconds(30)) == .success
            return (finished, parked)
        }
        #expect(parkedSeen >= 1, "no waiter parked: the slow path was not exercised")
        #expect(finished)
        #expect(counter.count == 104)
        #expect(ParkingLot.bucket(for: counter.key).withLock { $0.isEmpty })
    }

    @Test func parkReturnsAtOnceWhenItsConditionNoLongerHolds() {
        let key = ObjectIdentifier(GuardedCounter.self)
        ParkingLot.park(key) { false }  // would block for ever if it parked
        #expect(ParkingLot.bucket(for: key).withLock { $0.isEmpty })
    }

    @Test func unparkWithoutWaitersDoesNothing() {
        let key = ObjectIdentifier(ParkingMutexTests.self)
        ParkingLot.unparkOne(key)
        #expect(ParkingLot.bucket(for: key).withLock { $0.isEmpty })
    }
}
