import Synchronization
import TaskKit

/// A managed task that returns its number (the round-trip workloads' task).
public final class RoundTripTask: ManagedTask {
    public typealias SuccessValue = Int
    let value: Int
    public init(_ value: Int) { self.value = value }
    public func execute() async throws -> Int { value }
}

/// `n` sequential `value(of:)` round trips on a manager without interceptors; returns the sum.
public func managerRoundTrips(_ n: Int) async -> Int {
    let manager = TaskManager()
    var sum = 0
    for index in 0..<n { sum += (try? await manager.value(of: RoundTripTask(index))) ?? 0 }
    return sum
}

/// `n` sequential `value(of:)` round trips on a manager with one pass-through interceptor (the
/// general lane, which a manager with an interceptor, reactor, tracer or metrics takes); returns
/// the sum.
public func managerInterceptedRoundTrips(_ n: Int) async -> Int {
    let manager = TaskManager(interceptors: [PassThroughInterceptor()])
    var sum = 0
    for index in 0..<n { sum += (try? await manager.value(of: RoundTripTask(index))) ?? 0 }
    return sum
}

/// `n` sequential `addTask` + `next()` round trips on one task group; returns the sum.
public func taskGroupRoundTrips(_ n: Int) async -> Int {
    await withTaskGroup(of: Int.self) { group in
        var sum = 0
        for index in 0..<n {
            let task = RoundTripTask(index)
            group.addTask { (try? await task.execute()) ?? 0 }
            sum += await group.next() ?? 0
        }
        return sum
    }
}

/// An interceptor that lets every task through unchanged.
struct PassThroughInterceptor: Interceptor {
    func intercept<T: ManagedTask>(task: inout T, currentBatchCount: Int) -> InterceptCommand { .execute }
}

/// `n` tasks added at once through one pass-through interceptor, each with a completion, then
/// waited for (the throughput benchmark's shape); returns the sum.
public func managerThroughput(_ n: Int) async -> Int {
    let manager = TaskManager(interceptors: [PassThroughInterceptor()])
    let sum = RoundTripSum()
    for index in 0..<n {
        manager.add(task: RoundTripTask(index)) { result in
            if case .success(let value) = result { sum.add(value) }
        }
    }
    await manager.waitTillAllTasksFinished()
    return sum.total
}

/// `n` tasks added at once to one task group (the throughput benchmark's baseline); returns the sum.
public func taskGroupThroughput(_ n: Int) async -> Int {
    await withTaskGroup(of: Int.self) { group in
        for index in 0..<n {
            let task = RoundTripTask(index)
            group.addTask { (try? await task.execute()) ?? 0 }
        }
        var sum = 0
        for await value in group { sum += value }
        return sum
    }
}

/// A sum updated from completions.
final class RoundTripSum: Sendable {
    private let state = Mutex(0)
    func add(_ value: Int) { state.withLock { $0 += value } }
    var total: Int { state.withLock { $0 } }
}
