import Synchronization
import TaskKit

/// `n` cache hits on a `MonoTask` whose result never expires (no clock read); returns the sum.
/// The value is computed once, before the hits.
public func monoTaskHits(_ n: Int) async -> Int {
    let task = MonoTask<Int>(resultExpireDuration: nil) { .success(1) }
    _ = await task.asyncExecute()
    var sum = 0
    for _ in 0..<n { sum &+= (try? await task.asyncExecute().get()) ?? 0 }
    return sum
}

/// `n` cache hits on a `KeyedMonoTask` holding 1,000 keys, read in order; returns the sum.
/// The keys are loaded once, before the hits.
public func keyedMonoTaskHits(_ n: Int) async -> Int {
    let keys = 1_000
    let cache = KeyedMonoTask<Int, Int>(maximumEntries: keys, resultExpireDuration: .seconds(3_600)) { _ in 1 }
    _ = await cache.values(for: 0..<keys)
    var sum = 0
    for index in 0..<n { sum &+= (try? await cache.value(for: index % keys)) ?? 0 }
    return sum
}

/// `n` lookups in a `Mutex<[Int: Int]>` holding 1,000 keys, read in order, each from an async
/// function as a cache's caller would call it: the floor of a shared cache's hit.
public func lockedDictionaryHits(_ n: Int) async -> Int {
    let keys = 1_000
    let dictionary = Mutex<[Int: Int]>(Dictionary(uniqueKeysWithValues: (0..<keys).map { ($0, 1) }))
    var sum = 0
    for index in 0..<n { sum &+= await lockedLookup(dictionary, index % keys) }
    return sum
}

@inline(never)
func lockedLookup(_ dictionary: borrowing Mutex<[Int: Int]>, _ key: Int) async -> Int {
    dictionary.withLock { $0[key] ?? 0 }
}
