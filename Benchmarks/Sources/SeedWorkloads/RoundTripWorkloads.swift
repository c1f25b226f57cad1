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
