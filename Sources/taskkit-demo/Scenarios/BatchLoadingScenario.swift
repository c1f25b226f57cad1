#if Examples
import Foundation
import TaskKit

extension Scenario {
    /// KeyedMonoTask with a batch loader: 100 concurrent lookups of 100 distinct users through a
    /// loader of one key (one query each) and through a batch loader (one query per 50 users),
    /// against a database that runs one query at a time.
    static let batchLoading = Scenario(
        name: "batch", title: "KeyedMonoTask batch loading — 100 lookups, one query per 50 keys"
    ) { _, record in
        let lookups = 100
        let batchSize = 50

        // 1. A loader of one key: one query per user.
        let singleDatabase = DemoUserDatabase()
        let single = KeyedMonoTask<Int, String>(maximumEntries: 1_000, resultExpireDuration: .seconds(60)) { id in
            guard let name = await singleDatabase.users(ids: [id])[id] else { throw DemoError.unexpected("no user \(id)") }
            return name
        }
        let singleRun = await lookUp(lookups) { id in try? await single.value(for: id) }
        let singleQueries = await singleDatabase.queries

        // 2. A batch loader: the users asked for together go in one query, at most 50 per query.
        let batchDatabase = DemoUserDatabase()
        let batched = KeyedMonoTask<Int, String>(
            maximumEntries: 1_000, resultExpireDuration: .seconds(60), maximumBatchSize: batchSize
        ) { ids in
            await batchDatabase.users(ids: ids)
        }
        let batchRun = await lookUp(lookups) { id in try? await batched.value(for: id) }
        let batchQueries = await batchDatabase.queries
        let batchSizes = await batchDatabase.querySizes

        record.measure(
            "loader of one key",
            "\(singleQueries) queries, \(keysPerCall(lookups, singleQueries)) keys per query, \(singleRun.elapsed.milliseconds)"
        )
        record.measure(
            "batch loader, maximumBatchSize \(batchSize)",
            "\(batchQueries) queries (keys: \(batchSizes.map(String.init).joined(separator: ", "))), \(batchRun.elapsed.milliseconds)"
        )
        record.expect("lookups answered with their own user, loader of one key", singleRun.correct, equals: lookups)
        record.expect("lookups answered with their own user, batch loader", batchRun.correct, equals: lookups)
        record.expect("queries, loader of one key", singleQueries, equals: lookups)
        // 2 when every lookup has asked before the batch goes; a lookup still starting on another
        // core then gets a later query of its own.
        record.expect("queries, batch loader (100 keys: 2 of 50; a late lookup adds one)", batchQueries, atMost: lookups / 10)
        record.expect("most keys in one query", batchSizes.max() ?? 0, atMost: batchSize)
        record.expect("counters.batches counts the batch loader's calls", batched.counters.batches, equals: batchQueries)
        record.expect("counters.batchedKeys", batched.counters.batchedKeys, equals: lookups)
        record.expect("batch loader faster than one query per key", batchRun.elapsed < singleRun.elapsed, equals: true)
    }
}

/// Looks up users `0..<count` at once, one task-group child each; returns how many got their
/// own user's name and the time for all.
private func lookUp(
    _ count: Int, _ name: @escaping @Sendable (Int) async -> String?
) async -> (correct: Int, elapsed: Duration) {
    let start = ContinuousClock.now
    let correct = await withTaskGroup(of: Bool.self) { group in
        for id in 0..<count {
            group.addTask { await name(id) == DemoUserDatabase.name(of: id) }
        }
        return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
    }
    return (correct, start.duration(to: .now))
}

private func keysPerCall(_ keys: Int, _ calls: Int) -> String {
    calls == 0 ? "-" : String(format: "%.1f", Double(keys) / Double(calls))
}

/// A database behind one connection: queries run one after another, each taking 2 ms whatever
/// the number of ids it asks for. Counts the queries.
actor DemoUserDatabase {
    /// The number of ids each query asked for, in order.
    private(set) var querySizes: [Int] = []
    var queries: Int { querySizes.count }
    /// The query running or last queued: the next one starts after it.
    private var last: Task<Void, Never>?

    static func name(of id: Int) -> String { "user \(id)" }

    /// The names of `ids`, in one query.
    func users(ids: [Int]) async -> [Int: String] {
        querySizes.append(ids.count)
        let previous = last
        let query = Task {
            await previous?.value
            try? await Task.sleep(for: .milliseconds(2))
        }
        last = query
        await query.value
        return Dictionary(uniqueKeysWithValues: ids.map { ($0, Self.name(of: $0)) })
    }
}
#endif
