#if ServiceLifecycle
import Foundation
import Logging
import ServiceLifecycle
@testable import TaskKit
import TaskKitHTTP
import TaskKitServiceLifecycle
import TaskKitTestSupport
import TaskKitTesting
import Testing
import UnixSignals
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `TaskManager` as a `Service` inside a real `ServiceGroup`, shut down by a real signal.
///
/// Serialized: the signal goes to the whole process, and only one group listens at a time. The
/// signal is raised only once the probe service runs, that is after the group trapped it (a
/// `ServiceGroup` traps its signals before it starts any service).
@Suite(.serialized, .scaledTimeLimit(minutes: 1))
struct TaskManagerServiceTests {
    @Test func onSIGUSR1RunningAndQueuedTasksFinishNewOnesAreRefused() async throws {
        let manager = TaskManager(maximumConcurrentTasks: 1, shutdownGracePeriod: .seconds(3_600))
        let gate = TestGate()
        let first = Task { try await manager.value { await gate.wait(); return 1 } }
        // The first holds the only slot before the second is added: otherwise the second could
        // run (and finish) first.
        await gate.waitForArrivals(1)
        let second = Task { try await manager.value { 2 } }  // queued behind the first
        await eventually { manager.inspectUnfinished == 2 }

        let running = await runInServiceGroup(manager, gracefulShutdownSignals: [.sigusr1])
        kill(getpid(), SIGUSR1)
        await eventually { manager.isShuttingDown }

        await #expect(throws: TaskError.self) { try await manager.value { 3 } }
        let refused = ServiceTestBox()
        let handle = manager.add(execute: { 4 }, completion: { refused.set($0) })
        #expect(handle.identifier == 0)
        #expect(handle.state == .finished)
        #expect(refused.error == "TaskError.shuttingDown")

        gate.open()
        #expect(try await first.boundedValue() == 1)
        #expect(try await second.boundedValue() == 2)
        try await running.boundedValue()
    }

    @Test func afterTheGracePeriodWhatRemainsIsCancelledAndEveryCallerAnswered() async throws {
        let clock = ManualClock()
        let manager = TaskManager(shutdownGracePeriod: .seconds(5), clock: clock)
        let stuck = Task {
            try await manager.value { () async throws -> Int in
                try await Task.sleep(for: .seconds(3_600))
                return 1
            }
        }
        let notStarted = ServiceTestBox()
        manager.add(startImmediately: false, execute: { 2 }, completion: { notStarted.set($0) })
        await eventually { manager.inspectUnfinished == 1 }

        let running = await runInServiceGroup(manager, gracefulShutdownSignals: [.sigusr1])
        kill(getpid(), SIGUSR1)
        await eventually { manager.isShuttingDown }
        await clock.waitForSleepers(count: 1)  // the grace period
        clock.advance(by: .seconds(5))

        let error = await #expect(throws: TaskError.self) { try await stuck.boundedValue() }
        #expect(error.map { "\($0)" } == "TaskError.cancelled")
        try await running.boundedValue()
        #expect(notStarted.error == "TaskError.cancelled")
    }

    @Test func cancellingRunCancelsWhatRemainsAtOnce() async throws {
        let manager = TaskManager(shutdownGracePeriod: .seconds(3_600))
        let stuck = Task {
            try await manager.value { () async throws -> Int in
                try await Task.sleep(for: .seconds(3_600))
                return 1
            }
        }
        await eventually { manager.inspectUnfinished == 1 }
        let running = await runInServiceGroup(manager)
        running.cancel()

        let error = await #expect(throws: TaskError.self) { try await stuck.boundedValue() }
        #expect(error.map { "\($0)" } == "TaskError.cancelled")
        _ = try? await running.boundedValue()
        #expect(manager.isShuttingDown)
        await #expect(throws: TaskError.self) { try await manager.value { 3 } }
    }

    @Test func aURLTaskManagerRunsAsAServiceThroughItsTaskManager() async throws {
        let manager = URLTaskManager(transport: URLSessionTransport(), shutdownGracePeriod: .seconds(1))
        let probe = StartedProbe()
        let group = ServiceGroup(services: [manager, probe], logger: silentLogger)
        let running = Task { try await group.run() }
        await eventually { probe.started }
        await group.triggerGracefulShutdown()
        try await running.boundedValue()
        #expect(manager.taskManager.isShuttingDown)
        await #expect(throws: TaskError.self) {
            try await manager.data(for: URLRequest(url: URL(string: "http://127.0.0.1:9/")!))
        }
    }
}

/// Runs `service` in a new `ServiceGroup` (with a probe service) and returns the group's task
/// once the probe runs, that is once the group has trapped `gracefulShutdownSignals`.
private func runInServiceGroup(
    _ service: some Service, gracefulShutdownSignals: [UnixSignal] = []
) async -> Task<Void, any Error> {
    let probe = StartedProbe()
    let group = ServiceGroup(
        services: [service, probe], gracefulShutdownSignals: gracefulShutdownSignals, logger: silentLogger
    )
    let running = Task { try await group.run() }
    await eventually { probe.started }
    return running
}

private let silentLogger = Logger(label: "TaskKitServiceLifecycleTests", factory: { _ in SwiftLogNoOpLogHandler() })

/// A service that records that it runs, then waits for the group's graceful shutdown.
private final class StartedProbe: Service {
    private let flag = LockedState(false)
    var started: Bool { flag.withLock { $0 } }

    func run() async throws {
        flag.withLock { $0 = true }
        try? await gracefulShutdown()
    }
}

/// The result a completion delivered, read by the test.
private final class ServiceTestBox: Sendable {
    private let result = LockedState<Result<Int, any Error>?>(nil)
    func set(_ new: Result<Int, any Error>) { result.withLock { $0 = new } }
    /// The description of the delivered error; `nil` before delivery or for a success.
    var error: String? {
        result.withLock { result in
            guard case .failure(let error)? = result else { return nil }
            return "\(error)"
        }
    }
}

extension TaskManager {
    /// Started tasks not finished yet.
    fileprivate var inspectUnfinished: Int { storage.inspect { $0.unfinishedCount } }
}
#endif
